"""dsc's options for the paper's figures (docs/protocols/dsc.md#configuration): policies shared
per task (#a19), the warm-up (#a4), the nominal payload of Fig. 9 (#payload-override) and NYU-v2
read from its files (#a8), as typed keys and as real meshes."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from protocols.dsc.hyper import DSCHyper
from protocols.dsc.nyu import NYU_CLASSES
from protocols.dsc.routed_config import RoutedModelConfig
from protocols.dsc.routed_model import build_multitask_model
from tests.harness import Exited, assert_transports_identical, launch_ok
from tests.test_dsc_run import DEPTH, ROUNDS, SHARED, SPEC4, TINY, K, frame_seconds

RESNET18_BYTES = 44_706_048  # the paper's 44.71 MB per exchange (Fig. 9's S backbone)
# Three nodes, every pair of holders of a task neighbours: one-hop averaging is then exact.
TRIANGLE = """\
name: triangle
nodes:
  - {id: 0, position: [0.0, 0.0], tasks: [seg, dep]}
  - {id: 1, position: [1.0, 0.0], tasks: [seg, sn]}
  - {id: 2, position: [0.5, 0.8], tasks: [sn, dep]}
edges:
  - [0, 1]
  - [1, 2]
  - [0, 2]
"""
HOLDERS = {"seg": (0, 1), "sn": (1, 2), "dep": (0, 2)}
SMALL = ("--rounds", str(ROUNDS), "--eval-every", str(ROUNDS), "--transport", "inproc",
         "--set", "scenes={size: 16, train_size: 45, test_size: 8, min_size: 12}",
         "--set", "hyper.depth=1", "--set", "hyper.epochs=1",
         "--set", "hyper.warmup_rounds=0")  # policies from round 1 (docs/protocols/dsc.md#a20)


@pytest.fixture
def spec4(tmp_path: Path) -> str:
    path = tmp_path / "spec4.yaml"
    path.write_text(SPEC4)
    return str(path)


@pytest.fixture
def triangle(tmp_path: Path) -> str:
    path = tmp_path / "triangle.yaml"
    path.write_text(TRIANGLE)
    return str(path)


def final_logits(run: Path) -> dict[int, dict[str, np.ndarray]]:
    out = {}
    for node in range(3):
        state = load_file(str(run / "final" / f"node-{node}.safetensors"))
        out[node] = {key.removeprefix("policy_logits."): value for key, value in state.items()
                     if key.startswith("policy_logits.")}
    return out


# The keys.


def test_the_options_default_to_the_paper_and_the_launcher_shows_them(
    entry: Callable[..., Exited]
) -> None:
    hyper = DSCHyper()
    assert (hyper.policy_scope, hyper.payload_bytes) == ("client", None)
    # The specification's optional round-1 warm-up is the default (docs/protocols/dsc.md#a20).
    assert hyper.warmup_rounds == 1
    assert hyper.training().warmup_epochs == hyper.epochs
    assert DSCHyper(tau=0.5).tau == 0.5
    # Rounds become epochs for the trainer; the longer warm-up wins.
    assert DSCHyper(warmup_rounds=2, epochs=3, warmup_epochs=1).training().warmup_epochs == 6
    assert DSCHyper(warmup_rounds=1, epochs=2, warmup_epochs=7).training().warmup_epochs == 7
    done = entry("dfl-launch", "schema", "--protocol", "dsc")
    assert done.code == 0, done.err
    schema = json.loads(done.out)
    text = json.dumps(schema)
    for key in ("policy_scope", "warmup_rounds", "payload_bytes", "tau", "nyuv2"):
        assert f'"{key}"' in text, key


@pytest.mark.parametrize(("sets", "needle"), [
    (["hyper.policy_scope=tasks"], "hyper.policy_scope: input should be 'client' or 'task'"),
    (["hyper.warmup_rounds=-1"], "hyper.warmup_rounds"),
    (["hyper.payload_bytes=0"], "hyper.payload_bytes"),
    (["hyper.tau=0"], "hyper.tau"),
    (["nyuv2={min_size: 0}"], "nyuv2.min_size"),
])
def test_a_bad_option_is_one_line_and_exit_2(tmp_path: Path, entry: Callable[..., Exited],
                                             sets: list[str], needle: str) -> None:
    args = [arg for item in sets for arg in ("--set", item)]
    done = entry("dfl-launch", "--topology", "rgg10", "--protocol", "dsc", "--out",
                 str(tmp_path / "r"), *args)
    assert done.code == 2 and done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], done.err


# Policies per task, and the nominal payload, on the worked example's graph.


def test_task_scope_and_the_nominal_payload_are_exact_across_transports(
    tmp_path: Path, spec4: str
) -> None:
    zmq_sum, inproc_sum = assert_transports_identical(
        tmp_path, spec4, "dsc", *TINY, "--set", "link.compute_ms=0",
        "--set", "hyper.policy_scope=task", "--set", f"hyper.payload_bytes={RESNET18_BYTES}")
    run = tmp_path / "zmq"
    slots = json.loads((run / "schedule.json").read_text())["slots"]
    ledger = json.loads((run / "ledger.json").read_text())
    policy = {int(n): 4 * K * len(t) for n, t in zmq_sum["portfolios"].items()}
    links = [(a, b) for slot in slots for a, b in slot]
    # The real psi (and w) still travel: per link and round, POLICY, LOGITS (2 K x |T_a|
    # float32) and J PARAMS messages of the real size.
    for a, b in links:
        per_round = ledger[str(a)]["per_link"][f"{a}->{b}"]["payload_bytes"] / ROUNDS
        assert per_round == policy[a] + 2 * policy[a] + DEPTH * 4 * (SHARED + 1)
    # The clock charges psi at the nominal size; the control frames at their own.
    control = frame_seconds(slots, {link: policy[link[0]] for link in links})
    logits = frame_seconds(slots, {link: 2 * policy[link[0]] for link in links})
    frame = frame_seconds(slots, dict.fromkeys(links, RESNET18_BYTES + 4))
    expected = ROUNDS * (control + logits + DEPTH * frame)
    assert zmq_sum["virtual_seconds"] == pytest.approx(expected, rel=1e-12)
    assert inproc_sum["virtual_seconds"] == zmq_sum["virtual_seconds"]
    charged = json.loads((run / "links.json").read_text())["links"]
    assert {link: charged[f"{link[0]}->{link[1]}"]["payload_bytes"] for link in links} == {
        (a, b): ROUNDS * (3 * policy[a] + DEPTH * (RESNET18_BYTES + 4)) for a, b in links}
    # And so does the formula ledger.
    assert zmq_sum["formula"]["per_round"]["0"] == {
        "params": 8 * RESNET18_BYTES * DEPTH * len(links), "weight": 32 * DEPTH * len(links),
        "policy": 8 * sum(policy[a] for a, _ in links),
        "policy_logits": 16 * sum(policy[a] for a, _ in links)}


def test_the_nominal_payload_times_synchronous_steps_too(tmp_path: Path, triangle: str) -> None:
    """Without TDMA the protocol itself tells the clock a step's size (its largest message)."""
    summary = launch_ok(tmp_path / "run", triangle, "dsc", *SMALL, "--set", "schedule=sync",
                        "--set", "link.compute_ms=0",
                        "--set", f"hyper.payload_bytes={RESNET18_BYTES}")
    # Defaults: 1 ms, 100 Mbit/s, no loss, 1500-byte packets; POLICY is 4 K x 2 tasks.
    def step(size: int) -> float:
        return 1e-3 + math.ceil(size / 1500) * 8 * 1500 / 100e6
    assert summary["schedule"] == "sync"
    assert summary["virtual_seconds"] == pytest.approx(
        ROUNDS * (step(4 * K * 2) + step(RESNET18_BYTES + 4)), rel=1e-12)


def test_task_scope_gives_neighbouring_holders_of_a_task_one_policy(
    tmp_path: Path, triangle: str
) -> None:
    spec = RoutedModelConfig(name="routed")
    starts = [build_multitask_model(spec, tasks, 4, 0, node).policy_logits["seg"].detach()
              for node, tasks in ((0, ("seg", "dep")), (1, ("seg", "sn")))]
    assert bool((starts[0] == starts[1]).all())  # one start per task, whatever the client
    launch_ok(tmp_path / "task", triangle, "dsc", *SMALL, "--set", "hyper.policy_scope=task")
    launch_ok(tmp_path / "client", triangle, "dsc", *SMALL)
    task, client = final_logits(tmp_path / "task"), final_logits(tmp_path / "client")
    for t, (a, b) in HOLDERS.items():
        assert task[a][t].tobytes() == task[b][t].tobytes(), t
        assert not np.array_equal(client[a][t], client[b][t]), t  # learned apart otherwise
        assert np.abs(task[a][t]).max() > 0  # and still learned


# The warm-up.


def test_warmup_rounds_run_every_block_and_weigh_neighbours_uniformly(
    tmp_path: Path, triangle: str
) -> None:
    warm = launch_ok(tmp_path / "warm", triangle, "dsc", *SMALL,
                     "--set", f"hyper.warmup_rounds={ROUNDS}")
    for logits in final_logits(tmp_path / "warm").values():
        assert all(not value.any() for value in logits.values())  # never trained
    assert {tuple(u) for p in warm["policies"].values() for u in p.values()} == {(1,) * K}
    # Every affinity is 1, so Eq. 18's columns are uniform: 1/(d_n + 1) = 1/3 here.
    third = float(np.float32(1 / 3))
    assert warm["mixing_final"] == [[third] * 3] * 3
    launch_ok(tmp_path / "after", triangle, "dsc", *SMALL,
              "--set", f"hyper.warmup_rounds={ROUNDS - 1}")
    assert any(value.any() for logits in final_logits(tmp_path / "after").values()
               for value in logits.values())  # learned from round R_w + 1 on


# NYU-v2 from its files.


def write_nyu(root: Path, folder: str, count: int, rng: np.random.Generator) -> None:
    """The MTAN layout protocols/dsc/nyu.py reads, at 16 x 16."""
    arrays: dict[str, np.ndarray] = {
        "image": rng.uniform(0, 1, (count, 16, 16, 3)),
        "label": rng.integers(-1, NYU_CLASSES, (count, 16, 16)).astype(np.float32),
        "depth": rng.uniform(0.5, 5, (count, 16, 16, 1)),
        "normal": rng.normal(size=(count, 16, 16, 3))}
    for name, arr in arrays.items():
        (root / folder / name).mkdir(parents=True)
        for k in range(count):
            np.save(root / folder / name / f"{k}.npy", arr[k])


def test_dsc_learns_nyu_v2_from_its_files(tmp_path: Path, triangle: str) -> None:
    root = tmp_path / "nyu"
    rng = np.random.default_rng(0)
    write_nyu(root, "train", 30, rng)
    write_nyu(root, "val", 6, rng)
    summary = launch_ok(tmp_path / "run", triangle, "dsc", "--dataset", "nyuv2",
                        "--data-root", str(root), "--rounds", "1", "--eval-every", "1",
                        "--set", "nyuv2={min_size: 8}", "--set", "hyper.depth=1",
                        "--set", "hyper.epochs=1")
    assert summary["status"] == "ok" and summary["dataset"] == "nyuv2"
    metrics = [json.loads(line)
               for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    tasks = {m["node"]: set(m["task_metrics"]) for m in metrics if "task_metrics" in m}
    assert tasks == {0: {"seg", "dep"}, 1: {"seg", "sn"}, 2: {"sn", "dep"}}


@pytest.mark.parametrize(("args", "needle"), [
    (("--data-root", "{tmp}/nowhere"), "NYU-v2 not found"),
    ((), "NYU-v2 is read from --data-root DIR"),
])
def test_nyu_v2_without_its_files_is_one_line_and_exit_2(
    tmp_path: Path, triangle: str, entry: Callable[..., Exited], args: tuple[str, ...],
    needle: str
) -> None:
    given = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    done = entry("dfl-launch", "--topology", triangle, "--protocol", "dsc", "--dataset", "nyuv2",
                 "--out", str(tmp_path / "r"), *given)
    assert done.code == 2 and done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], done.err


def test_nyu_v2_refuses_a_task_it_has_no_labels_for(
    tmp_path: Path, entry: Callable[..., Exited]
) -> None:
    root = tmp_path / "nyu"
    rng = np.random.default_rng(1)
    write_nyu(root, "train", 30, rng)
    write_nyu(root, "val", 2, rng)
    topology = tmp_path / "t.yaml"
    topology.write_text(TRIANGLE.replace("tasks: [sn, dep]", "tasks: [sn, kp]"))
    done = entry("dfl-launch", "--topology", str(topology), "--protocol", "dsc", "--dataset",
                 "nyuv2", "--data-root", str(root), "--out", str(tmp_path / "r"))
    assert done.code == 2 and done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and "node 2: NYU-v2 has no labels for ['kp']" in lines[0], done.err
