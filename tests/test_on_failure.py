"""`--on-failure stop|continue` on real meshes: real processes, real SIGKILL and SIGSTOP.

stop: the run ends at a death, names the dead node (also one that hangs without dying, found by
its neighbours' heartbeats within a counted number of heartbeat intervals), keeps the completed
evaluations, exits 1.
continue (d-psgd, dmfl-sq): the survivors agree on the round from which they run without the
dead node and finish every round; a disconnected surviving graph stops the run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness import ENV_ROOT, ROOT, Exited, assert_transports_identical
from tests.proc_util import node_pids, wait_for

HEX6 = """\
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}, {id: 4}, {id: 5}]
edges: [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 0]]
"""
LINE5 = """\
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}, {id: 4}]
edges: [[0, 1], [1, 2], [2, 3], [3, 4]]
"""
QUIET = ("--dataset", "synthetic", "--quiet", "--no-plots")


def topology(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def start(run: Path, topo: str, protocol: str, *args: str,
          env: dict[str, str] | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "launcher.cli", "--topology", topo, "--protocol", protocol,
           "--out", str(run), *QUIET, *args]
    return subprocess.Popen(cmd, env=env or ENV_ROOT, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def metrics(run: Path) -> list[dict]:
    """The rows written so far: the run is live, so a last line may be half written; only
    lines that end in a newline are complete."""
    path = run / "metrics.jsonl"
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.split("\n")[:-1]]


def hit_after_evaluations(proc: subprocess.Popen, run: Path, nodes: int, node: int,
                          sig: signal.Signals, evaluations: int = 2) -> str:
    """Send `sig` to `node` once every node has reported `evaluations` evaluations; the
    launcher's stderr."""
    try:
        wait_for(lambda: len(metrics(run)) >= evaluations * nodes, 300, "evaluations")
        os.kill(node_pids(run)[node], sig)
        _, err = proc.communicate(timeout=600)
        return err
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP])
def test_stop_ends_the_run_naming_the_dead_node_found_within_a_deadline(
        tmp_path: Path, sig: signal.Signals) -> None:
    """A killed node is the launcher's own child: its exit is the verdict. A stopped one still
    holds its sockets: its neighbours find it by heartbeats. The bound is counted in heartbeat
    intervals (a tenth of the deadline each), the unit in which the product promises it: libzmq
    drops a silent connection after 4 intervals, the verdict comes 5 intervals later, so a
    verdict after more than 16 intervals without a connection would break two deadlines."""
    run = tmp_path / "r"
    proc = start(run, topology(tmp_path, "hex6", HEX6), "d-psgd", "--rounds", "100000",
                 "--deadline", "10")
    err = hit_after_evaluations(proc, run, 6, 2, sig)
    assert proc.returncode == 1, err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["failed_node"] == 2
    [failure] = summary["failures"]
    assert failure["node"] == 2 and summary["graph_changes"] == []
    assert "dfl-launch: node 2 failed (" in err
    if sig == signal.SIGKILL:
        assert "(killed by signal 9" in err and "silent_intervals" not in failure
    else:
        assert "neighbour(s) [2] stopped answering" in err
        assert 5 <= failure["silent_intervals"] <= 16, failure
    kept = Counter(r["node"] for r in metrics(run))
    assert set(kept) == set(range(6)) and min(kept.values()) >= 2


def test_a_node_busy_for_longer_than_the_deadline_is_not_declared_dead(tmp_path: Path) -> None:
    """Node 2 computes for three deadlines in round 1, holding the GIL; libzmq's I/O thread
    answers its heartbeats meanwhile, so nobody declares it dead. Its log says the stall ran
    its whole length (liveness.stall_for_test)."""
    env = {**ENV_ROOT, "DFL_TEST_STALL": "2:1:6"}
    run = tmp_path / "r"
    proc = start(run, topology(tmp_path, "hex6", HEX6), "d-psgd", "--rounds", "3",
                 "--deadline", "2", env=env)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["failures"] == []
    assert "stalled round 1 for 6 s (DFL_TEST_STALL)" in (run / "logs" / "node-2.log").read_text()
    assert Counter(r["node"] for r in metrics(run)) == dict.fromkeys(range(6), 3)
    assert summary["heartbeat_bytes"] > 0


def test_continue_stops_when_the_survivors_are_disconnected(tmp_path: Path) -> None:
    run = tmp_path / "r"
    proc = start(run, topology(tmp_path, "line5", LINE5), "d-psgd", "--rounds", "100000",
                 "--deadline", "3", "--on-failure", "continue")
    err = hit_after_evaluations(proc, run, 5, 2, signal.SIGKILL)
    assert proc.returncode == 1, err
    assert "dfl-launch: node 2 failed (" in err
    assert "surviving graph is disconnected" in err and "2 components of sizes 2, 2" in err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["failed_node"] == 2


@pytest.mark.parametrize(("args", "needle"), [
    (("--protocol", "choco-sgd", "--on-failure", "continue"),
     "--on-failure continue: choco-sgd has no rules for losing a node"),
    (("--protocol", "d-psgd", "--deadline", "0"), "--deadline: wire.deadline_s: must be > 0"),
    (("--protocol", "d-psgd", "--set", "wire.on_failure=retry"), "wire.on_failure"),
])
def test_failure_options_are_checked_before_anything_starts(
        tmp_path: Path, entry: Callable[..., Exited], args: tuple, needle: str) -> None:
    done = entry("dfl-launch", "--topology", "ring20", *args, "--out", str(tmp_path / "r"))
    assert done.code == 2 and done.out == ""
    assert done.err.count("\n") == 1 and needle in done.err, done.err
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["d-psgd", "dmfl-sq"])
def test_continue_on_ring20_the_survivors_finish_every_round(tmp_path: Path,
                                                             protocol: str) -> None:
    rounds = 50
    run = tmp_path / "r"
    proc = start(run, "ring20", protocol, "--rounds", str(rounds), "--eval-every", "1",
                 "--deadline", "3", "--on-failure", "continue")
    err = hit_after_evaluations(proc, run, 20, 7, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert "node 7 died (killed by signal 9 (SIGKILL))" in err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "ok"
    assert summary["failures"] == [{"node": 7, "reason": "killed by signal 9 (SIGKILL)"}]
    assert "graph_changes_by_node" not in summary  # every survivor switched at the same round
    [change] = summary["graph_changes"]
    ring = [[i, (i + 1) % 20] if i < 19 else [0, 19] for i in range(20)]
    assert change["dead"] == [7] and change["nodes"] == 19
    assert change["edges"] == sorted(e for e in ring if 7 not in e)
    rows = metrics(run)
    done = Counter(r["node"] for r in rows)
    assert done == {**dict.fromkeys(set(range(20)) - {7}, rounds), 7: done[7]}
    assert 2 <= done[7] <= change["round"]  # its rows before it died are kept
    assert sorted(p.name for p in (run / "final").glob("node-*[0-9].safetensors")) == sorted(
        f"node-{i}.safetensors" for i in range(20) if i != 7)
    if protocol == "dmfl-sq":
        after = [r for r in rows if r["round"] > change["round"]]  # metrics round = r + 1
        # K_Psi is the surviving path's diameter (18): 18 x 37 bits per link, and every
        # survivor selects the same client in every round
        assert {(r["node"], r["psi_bits"]) for r in after if r["node"] in (6, 8, 0)} == {
            (6, 18 * 37.0), (8, 18 * 37.0), (0, 2 * 18 * 37.0)}
        for round_ in range(change["round"] + 1, rounds + 1):
            assert len({r["selected"] for r in after if r["round"] == round_}) == 1



def test_the_agreement_keeps_the_transports_bit_identical(tmp_path: Path) -> None:
    zmq_sum, _ = assert_transports_identical(
        tmp_path, topology(tmp_path, "hex6", HEX6), "dmfl-sq", "--on-failure", "continue",
        "--rounds", "3", *QUIET)
    assert zmq_sum["failures"] == [] and zmq_sum["graph_changes"] == []
