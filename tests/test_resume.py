"""Checkpoints and `dfl-launch --resume`: a run killed mid-way (SIGKILL to the launcher's whole
process group) and resumed ends exactly as a run that never stopped: the same final/ files, the
same ledgers, formula bits and virtual time, and every metrics row once. A damaged checkpoint
(tests/checkpoint_damage.py) is refused before any node starts, and the fall-back from it ends
exactly too."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import numpy as np
import pytest
import torch

import dfl_mesh
from dfl_mesh.testing.compare import metrics_rows, results_difference
from dfl_mesh.testing.kill import kill_after_checkpoint, node_ids
from dfl_node.learning.training import BatchSampler
from dfl_node.state import checkpoint_codec as statecodec
from dfl_node.state import checkpoint_file as checkpoint
from dfl_node.state import checkpoint_layout as layout
from launcher.config.options import run_options
from launcher.run.resume import keep_rounds_through
from protocols.registry import PROTOCOLS
from tests.checkpoint_damage import DAMAGES, damage, flip_bit
from tests.harness import ENV_ROOT, ROOT, Exited, launch_ok
from tests.rings import ring_file

SYNTH = ("--dataset", "synthetic", "--partition", "iid", "--set", "model={name: mlp}")


def resume(run_dir: Path, *args: str,
           python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    """`dfl-launch --resume RUN_DIR` as a shell would run it."""
    return subprocess.run([python, "-m", "launcher.cli", "--resume", str(run_dir), *args,
                           "--quiet", "--no-plots"], cwd=ROOT, env=ENV_ROOT,
                          capture_output=True, text=True, timeout=600)


def resume_ok(run_dir: Path, python: str = sys.executable) -> dict[str, Any]:
    proc = resume(run_dir, python=python)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((run_dir / "summary.json").read_text())


def assert_resumed_equals_uninterrupted(tmp_path: Path, topology: str, protocol: str,
                                        kill_round: int, *args: str,
                                        python: str = sys.executable,
                                        after_kill: Callable[[Path], None] | None = None,
                                        fault: str = "sigkill") -> int:
    """Run once through (in-process: the transports agree bit for bit), once over zmq killed
    after `kill_round` (then `after_kill` on its run directory) and resumed; demand equality.
    Returns the round resumed from."""
    full = tmp_path / "full"
    launch_ok(full, topology, protocol, "--quiet", *args, "--transport", "inproc", python=python)
    cut = tmp_path / "cut"
    kill_after_checkpoint(cut, kill_round, ["--topology", topology, "--protocol", protocol,
                                            *args], python=python, fault=fault, cwd=ROOT,
                          env=ENV_ROOT)
    resumed_from = layout.last_complete_round(cut, node_ids(cut))
    assert resumed_from >= kill_round
    if after_kill is not None:
        after_kill(cut)
    assert_ends_as(cut, full, resume_ok(cut, python))
    return resumed_from


def assert_ends_as(resumed: Path, full: Path, summary: dict[str, Any]) -> None:
    """The resumed run's results are the uninterrupted run's, byte for byte."""
    assert summary["status"] == "ok"
    differ = results_difference(resumed, full)
    assert differ is None, differ


def test_dpsgd_killed_and_resumed_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    ring = ring_file(tmp_path)
    resumed_from = assert_resumed_equals_uninterrupted(
        tmp_path, ring, "d-psgd", 2, *SYNTH, "--rounds", "16", "--eval-every", "4",
        "--checkpoint-every", "2", "--set", "local_steps=2")
    assert resumed_from == 2  # node 0 stalled in round 3, so no node finished it


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["sigterm", "zygote"])
def test_a_run_stopped_by_a_fault_resumes_exactly(tmp_path: Path, fault: str) -> None:
    """SIGTERM's orderly stop and the zygote's death end a run with exit 143 and 1
    (tests/test_run_faults.py); what they leave resumes to the uninterrupted run's results."""
    assert_resumed_equals_uninterrupted(
        tmp_path, ring_file(tmp_path), "d-psgd", 2, *SYNTH, "--rounds", "4", "--eval-every", "2",
        "--checkpoint-every", "2", fault=fault)


def test_a_metrics_row_the_kill_caught_in_flight_is_written_on_resume(tmp_path: Path) -> None:
    """A node sends its evaluation, then saves its checkpoint; a kill after the checkpoint can
    still beat the record to the launcher's file. The resumed nodes start after that round and
    do not send it again: `--resume` writes it from the checkpoint, which holds it."""

    def lose_node_1s_last_row(run_dir: Path) -> None:
        path = run_dir / "metrics.jsonl"
        rows = metrics_rows(run_dir)
        kept = [r for r in rows if (r["round"], r["node"]) != (2, 1)]
        assert len(kept) == len(rows) - 1  # it had arrived here; now it is as if it had not
        path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))

    assert_resumed_equals_uninterrupted(
        tmp_path, ring_file(tmp_path), "d-psgd", 2, *SYNTH, "--rounds", "4", "--eval-every", "2",
        "--checkpoint-every", "2", after_kill=lose_node_1s_last_row)


# Four rounds: the kill lands after round 2's checkpoint (node 0 stalls in round 3), so the
# resumed run still has rounds of its own to get right, evaluated at round 4. Every protocol runs
# the synthetic task so; SSD-FL's family aggregates every second iteration, and DSC brings its
# own tiny scenes.
GENERIC = ("--rounds", "4", "--eval-every", "2")
RESUMABLE = {name: (*GENERIC, "--set", "tau_a=2") for name in ("ssd-fl", "sdfl", "pdfl", "stc",
                                                               "cstc")}
DSC_TINY = (*GENERIC,
            "--set", "scenes={size: 16, train_size: 100, test_size: 16, min_size: 12}",
            "--set", "hyper.depth=2", "--set", "hyper.epochs=1",
            "--set", "tdma.interference_range=1")


@pytest.mark.slow
@pytest.mark.parametrize("protocol", [p for p in PROTOCOLS if p != "d-psgd"])  # d-psgd: above
def test_every_protocol_resumes_exactly(tmp_path: Path, protocol: str) -> None:
    """Every registered protocol, so that one whose `checkpoint_fields` miss some state fails
    here rather than in a user's resumed run."""
    args = DSC_TINY if protocol.startswith("dsc") else (*SYNTH,
                                                         *RESUMABLE.get(protocol, GENERIC))
    assert_resumed_equals_uninterrupted(tmp_path, ring_file(tmp_path), protocol, 2, *args,
                                        "--checkpoint-every", "2")


def test_resume_refuses_a_changed_topology_file(tmp_path: Path,
                                                entry: Callable[..., Exited]) -> None:
    ring = ring_file(tmp_path)
    run = tmp_path / "run"
    launch_ok(run, ring, "d-psgd", *SYNTH, "--rounds", "2", "--checkpoint-every", "1",
              "--transport", "inproc", "--quiet", "--no-plots")
    (run / "summary.json").unlink()  # as a killed run has none (a finished one is not resumed)
    Path(ring).write_text(Path(ring).read_text() + "  - [0, 3]\n")  # a chord
    done = entry("dfl-launch", "--resume", str(run))
    assert done.code == 2 and done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and "changed" in lines[0] and f"topology ({ring})" in lines[0]
    assert "protocol" not in lines[0].split("changed", 1)[1].replace(f"({ring})", "")


def test_resume_without_a_run_or_with_run_options_is_exit_2(
        tmp_path: Path, entry: Callable[..., Exited]) -> None:
    for args, reason in [((), "not a run directory"), (("--rounds", "3"), "drop --rounds"),
                         (("--on-corrupt", "maybe"), "'maybe' is not one of 'fallback', 'stop'")]:
        done = entry("dfl-launch", "--resume", str(tmp_path), *args)
        assert done.code == 2 and done.out == ""
        lines = done.err.strip().splitlines()
        assert len(lines) == 1 and reason in lines[0], lines


RUN_PARAMS = click.command()(run_options(lambda **_: None)).params
"""The options `dfl-launch` declares for a run (launcher/config/options.py)."""


def test_resume_refuses_every_run_option_but_on_corrupt(
        tmp_path: Path, entry: Callable[..., Exited]) -> None:
    """The run directory fixes a resumed run's inputs: an option given beside --resume would be
    ignored, so each is refused by name (--secure, --keys, --deadline and --on-failure once
    were ignored). Walks the options the command line declares, so a new one is covered."""
    values = {"--seeds": "0-1", "--transport": "inproc", "--on-failure": "continue",
              "--set": "lr=0.1"}
    flags = [opt for param in RUN_PARAMS for opt in param.opts if opt.startswith("--")]
    assert {"--secure", "--keys", "--deadline", "--on-failure"} <= set(flags)
    for flag in flags:
        if flag == "--on-corrupt":
            continue
        args = (flag,) if flag == "--secure" else (flag, values.get(flag, "3"))
        done = entry("dfl-launch", "--resume", str(tmp_path), *args)
        assert done.code == 2 and done.out == "", flag
        assert done.err.strip().splitlines() == [
            f"dfl-launch: --resume: the run directory fixes the inputs; drop {flag}"], flag


def test_checkpoint_files_round_trip_generators_optimizers_and_counters(tmp_path: Path) -> None:
    """The codec restores what the next draw, step or sum reads, bit for bit."""
    rng = np.random.default_rng(7)
    sampler = BatchSampler(np.arange(50.0).reshape(25, 2), np.arange(25), 4, rng,
                           torch.device("cpu"))
    sampler.next()
    gen = torch.Generator().manual_seed(3)
    torch.rand(5, generator=gen)
    layer = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(layer.parameters(), lr=0.1)
    layer(torch.ones(1, 3)).sum().backward()
    opt.step()
    state = checkpoint.State()
    for name, value in {"sampler": sampler, "gen": gen, "layer": layer, "opt": opt,
                        "rows": [{1: 0.5, 3: 0.25}], "counts": {2: 5}}.items():
        state.put(name, statecodec.capture(value))
    checkpoint.write(tmp_path / "c.safetensors", state)
    back = checkpoint.read(tmp_path / "c.safetensors")
    expected = (sampler.next()[1], torch.rand(5, generator=gen))
    opt.step()
    expected_w = layer.weight.detach().clone()

    sampler2 = BatchSampler(sampler.x, sampler.y, 4, np.random.default_rng(0), sampler.device)
    gen2, layer2 = torch.Generator(), torch.nn.Linear(3, 2)
    opt2 = torch.optim.Adam(layer2.parameters(), lr=0.1)
    statecodec.restore(sampler2, back.part("sampler"))
    statecodec.restore(gen2, back.part("gen"))
    statecodec.restore(layer2, back.part("layer"))
    statecodec.restore(opt2, back.part("opt"))
    for mine, theirs in zip(layer2.parameters(), layer.parameters(), strict=True):
        mine.grad = theirs.grad.clone()
    assert torch.equal(sampler2.next()[1], expected[0])
    assert torch.equal(torch.rand(5, generator=gen2), expected[1])
    opt2.step()
    assert torch.equal(layer2.weight, expected_w)
    assert statecodec.restore([], back.part("rows")) == [{1: 0.5, 3: 0.25}]
    assert statecodec.restore({}, back.part("counts")) == {2: 5}
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_last_two_complete_rounds_are_kept_and_older_ones_pruned(tmp_path: Path) -> None:
    """The newest complete round is where a resume starts; the one before is its fall-back
    when a file of the newest is refused."""
    def save(node: int, round_: int) -> None:
        checkpoint.write(layout.checkpoint_path(tmp_path, node, round_),
                         checkpoint.State({"w": torch.full((2,), float(round_))}, {"r": round_}))

    for node, round_ in [(0, 2), (0, 4), (1, 2)]:
        save(node, round_)
    assert layout.last_complete_round(tmp_path, [0, 1]) == 2
    assert layout.last_complete_round(tmp_path, [0, 1, 2]) == 0  # node 2 saved nothing
    layout.prune(tmp_path, 0, [0, 1])
    assert layout.saved_rounds(tmp_path, 0) == [2, 4]
    save(1, 4)
    save(0, 6)
    layout.prune(tmp_path, 0, [0, 1])
    assert layout.saved_rounds(tmp_path, 0) == [2, 4, 6]  # complete: 2 and 4
    save(1, 6)
    layout.prune(tmp_path, 0, [0, 1])
    assert layout.saved_rounds(tmp_path, 0) == [4, 6]
    back = checkpoint.read(layout.checkpoint_path(tmp_path, 0, 4))
    assert back.meta == {"r": 4} and back.tensors["w"].tolist() == [4.0, 4.0]


def test_rows_after_the_resume_round_are_cut(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    rows = [{"round": r, "node": n} for r in (2, 4, 6) for n in (0, 1)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows) + '{"round": 8, "no')
    keep_rounds_through(path, 4)
    assert [json.loads(line) for line in path.read_text().splitlines()] == rows[:4]


def snapshot(run_dir: Path) -> dict[str, bytes]:
    """Every file of a run directory with its bytes: what a node that started would change (its
    log with its pid, metrics rows, checkpoints)."""
    return {str(p.relative_to(run_dir)): p.read_bytes()
            for p in sorted(run_dir.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 6-node d-psgd run of two rounds that checkpointed both (rounds 1 and 2 kept)."""
    where = tmp_path_factory.mktemp("finished")
    launch_ok(where / "run", ring_file(where), "d-psgd", *SYNTH, "--rounds", "2",
              "--checkpoint-every", "1", "--transport", "inproc", "--quiet", "--no-plots")
    return where / "run"


@pytest.mark.parametrize("kind", DAMAGES)
def test_resume_refuses_a_damaged_checkpoint_before_any_node_starts(
        tmp_path: Path, finished_run: Path, entry: Callable[..., Exited], kind: str) -> None:
    """A flipped bit, a changed generator state, an older round's file under a newer name, a
    cut file: `--on-corrupt stop` names the node, round, file and reason in one line and exits 2
    with the run directory as it was."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    (run / "summary.json").unlink()  # as a killed run has none: a finished one is not resumed
    reason = damage(kind, run, 2, 2, older=1)
    before = snapshot(run)
    done = entry("dfl-launch", "--resume", str(run), "--on-corrupt", "stop")
    assert done.code == 2 and done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1, lines
    assert (f"node 2's checkpoint of round 2 ({layout.checkpoint_path(run, 2, 2)}) is refused: "
            f"{reason}") in lines[0]
    assert lines[0].endswith("refusing to resume (on_corrupt: stop; --on-corrupt fallback "
                             "resumes from round 1, the newest round every node holds intact)")
    assert snapshot(run) == before


def test_final_models_carry_digests_their_reader_checks(tmp_path: Path,
                                                         finished_run: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    result = dfl_mesh.load(run)
    assert sorted(result.verify()) == [f"node-{i}.safetensors" for i in range(6)]
    flip_bit(run / "final" / "node-3.safetensors")
    with pytest.raises(dfl_mesh.InputError) as caught:
        result.verify()
    assert str(caught.value) == (f"{run / 'final' / 'node-3.safetensors'}: its bytes do not "
                                 "match its digest (a tensor or metadata value changed since "
                                 "it was written)")


@pytest.mark.slow
def test_refused_checkpoints_fall_back_to_the_newest_intact_round_and_end_exactly(
        tmp_path: Path) -> None:
    """A run killed after round 4, then node 1's file of round 4 given a flipped bit, node 2's
    a changed generator state, node 3's replaced by its round-2 file, node 4's cut short.
    `--on-corrupt stop` refuses before any node starts; the default policy (fallback) sets the
    four aside, resumes from round 2 and ends as the run that never stopped, byte for byte."""
    ring = ring_file(tmp_path)
    args = (*SYNTH, "--rounds", "8", "--eval-every", "2", "--checkpoint-every", "2")
    full = tmp_path / "full"
    launch_ok(full, ring, "d-psgd", "--quiet", *args, "--transport", "inproc")
    cut = tmp_path / "cut"
    kill_after_checkpoint(cut, 4, ["--topology", ring, "--protocol", "d-psgd", *args], cwd=ROOT,
                          env=ENV_ROOT)
    assert layout.complete_rounds(cut, node_ids(cut)) == [2, 4]
    reasons = {node: damage(kind, cut, node, 4, older=2)
               for node, kind in enumerate(DAMAGES, start=1)}
    before = snapshot(cut)

    stopped = resume(cut, "--on-corrupt", "stop")
    assert stopped.returncode == 2 and stopped.stdout == ""
    assert stopped.stderr.strip().splitlines() == [
        f"dfl-launch: --resume {cut}: node 1's checkpoint of round 4 "
        f"({layout.checkpoint_path(cut, 1, 4)}) is refused: {reasons[1]} (a tensor or metadata "
        "value changed since it was written) (and 3 more refused files); refusing to resume "
        "(on_corrupt: stop; --on-corrupt fallback resumes from round 2, the newest round every "
        "node holds intact)"]
    assert snapshot(cut) == before  # no node started: no log, no pid, no row, no file moved

    resumed = resume(cut)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    lines = resumed.stderr.strip().splitlines()
    for node, reason in reasons.items():
        path = layout.checkpoint_path(cut, node, 4)
        said = [line for line in lines
                if f"node {node}'s checkpoint of round 4 ({path}) is refused: " in line]
        assert len(said) == 1 and reason in said[0], lines
        assert said[0].endswith(f"; set aside as {path.name}.refused")
        assert path.with_name(f"{path.name}.refused").is_file()
    assert (f"dfl-launch: --resume {cut}: resuming from round 2, the newest round every node "
            "holds intact (on_corrupt: fallback)") in lines
    assert_ends_as(cut, full, json.loads((cut / "summary.json").read_text()))
