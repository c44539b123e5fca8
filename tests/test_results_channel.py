"""The results channel: every record to the collector is sealed with the run's results key, in
every run, and a collector and its nodes agree on the plan before any result counts.

Attackers are real ZeroMQ sockets of the test process without the key; the runs are real
launches (node processes over ZeroMQ, without --secure) and real `dfl-launch collect` and
`dfl-node` processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import stat
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest
import zmq

from dfl_node.plan import PlanError, RunPlan
from dfl_node.runner.record_sink import NoCollector, ZmqRecordSink
from dfl_node.runner.results_seal import RECORD, new_results_key, results_key, seal
from launcher.config.host_plan import resolve_host_plan
from launcher.config.ports import PortClaims
from launcher.config.run_spec import RunSpec
from launcher.run.collector import Collector, PlanDiffers, ZmqSource
from tests.harness import ENV_ROOT, ROOT, start_stalled_ring4
from tests.proc_util import listening, wait_for

ROUNDS = 3
HOLD_S = 10  # node 0 computes this long at the start of round 1: the run outlasts the attack
FORGED = 5  # of each kind


@pytest.fixture
def ports(port_claims: PortClaims) -> list[int]:
    return port_claims.claim(3)


def plan_of(tmp_path: Path, ports: list[int], count: int, *sets: str) -> RunPlan:
    """`count` (1 or 2) nodes on fixed loopback ports, the collector on the third."""
    nodes = [{"id": i, "host": "127.0.0.1", "port": ports[i]} for i in range(count)]
    path = tmp_path / "mesh.yaml"
    path.write_text(json.dumps({"name": "mesh", "nodes": nodes,
                                "edges": [[0, 1]] if count == 2 else []}))
    return resolve_host_plan(RunSpec(topology=str(path), protocol="d-psgd",
                                     options={"dataset": "synthetic", "rounds": 2},
                                     sets=(f"endpoints.collector=127.0.0.1:{ports[2]}",
                                           "model={name: mlp, hidden: [8]}", *sets)))


def forgeries(key: bytes) -> list[list[bytes]]:
    """What a local process without the key can send: a metrics row, an `error` that would end
    the run naming node 3, garbage, and a record under a seal made with another key."""
    row = msgpack.packb({"type": "metrics", "node": 3, "round": 1, "accuracy": 0.999})
    error = msgpack.packb({"type": "error", "node": 3, "message": "forged"})
    wrong = bytes(reversed(key))
    return [*[[row]] * FORGED, *[[error]] * FORGED, *[[b"\xc1\x00"]] * FORGED,
            *[[seal(wrong, 3, 10**18, RECORD, error)]] * FORGED]


def test_a_forged_record_neither_counts_nor_ends_the_run(tmp_path: Path) -> None:
    """A run without --secure; during it, a DEALER of this process sends the collector forged
    records, and a PUSH (a socket type the collector does not talk to) forged rows too."""
    run = tmp_path / "run"
    launcher = start_stalled_ring4(tmp_path, ROUNDS, HOLD_S)
    metrics = run / "metrics.jsonl"
    wait_for(lambda: metrics.exists() and metrics.read_text().count("\n") >= 4, 300, "round 1")
    plan = RunPlan.load(run / "plan.json")
    assert stat.S_IMODE((run / "plan.json").stat().st_mode) == 0o600  # it holds the key
    ctx = zmq.Context()
    try:
        dealer, push = ctx.socket(zmq.DEALER), ctx.socket(zmq.PUSH)
        for sock in (dealer, push):
            sock.setsockopt(zmq.LINGER, 5000)
            sock.connect(plan.collector)
        for frames in forgeries(results_key(plan)):
            dealer.send_multipart(frames)
            with contextlib.suppress(zmq.Again):  # ZeroMQ may refuse it at once: no peer
                push.send_multipart(frames, zmq.NOBLOCK)
    finally:
        ctx.destroy(linger=5000)  # returns once the dealer's records are out
    assert launcher.poll() is None, "the run ended before the attack did"
    _, err = launcher.communicate(timeout=600)
    assert launcher.returncode == 0, err
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert sorted((r["round"], r["node"]) for r in rows) == [
        (r, n) for r in range(1, ROUNDS + 1) for n in range(4)]
    assert all(r["accuracy"] != 0.999 for r in rows)
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["status"], summary["failed_node"]) == ("ok", None)
    assert summary["rejected_records"] == {"unauthenticated": 4 * FORGED}


def test_a_node_of_another_plan_is_refused_and_told(tmp_path: Path, ports: list[int]) -> None:
    """Real sockets, no processes: the collector answers a node whose plan differs (lr) with the
    sections that differ and stops; the node, told so, refuses to send it anything. A node
    sealing with another key is not heard at all, and sends nothing either."""
    plan, theirs = plan_of(tmp_path, ports, 2), plan_of(tmp_path, ports, 2, "lr=0.3")
    assert plan.results_key != theirs.results_key  # each resolution draws its own
    other = dataclasses.replace(theirs, results_key=plan.results_key)
    collector = Collector(ZmqSource(plan), tmp_path / "run", plan.ids)
    impatient = plan_of(tmp_path, ports, 2, "wire.rendezvous_s=0.5")
    strange = ZmqRecordSink(dataclasses.replace(impatient, results_key=new_results_key()), 1)
    try:
        wait_for(lambda: collector.pump(0.1) and collector.rejected, 30, "the stranger's hello")
        assert collector.rejected == {"unauthenticated": 1}
        sink = ZmqRecordSink(other, 0)
        sink.emit({"type": "ready", "node": 0, "pid": 1})
        with pytest.raises(PlanDiffers) as refused:
            wait_for(lambda: collector.pump(0.1) and False, 30, "node 0's hello")
        assert str(refused.value) == ("node 0's plan differs in ['protocol'] from this "
                                      "collector's; refusing to collect its results")
    finally:
        collector.close()
    with pytest.raises(PlanError) as told:
        sink.close()
    assert str(told.value) == ("node 0: the collector's plan differs in ['protocol']; "
                               "refusing to send it results")
    # It waits for a verdict as long as its plan waits for the mesh to start, then says so.
    with pytest.raises(NoCollector, match=r"^node 1: no collector at tcp://127.0.0.1:\d+ agreed "
                       r"to the plan within 0.5 s \(wire.rendezvous_s\); 0 record\(s\) were "
                       r"not sent$"):
        strange.close()
    assert not (tmp_path / "run").exists()


def test_collect_with_another_plan_refuses_in_one_line(tmp_path: Path, ports: list[int]) -> None:
    """`dfl-launch collect` with lr 0.3, a node with lr 0.1 (a mesh of one, so that the node
    waits for nobody): the collector exits 2 naming the section and writes nothing; the node,
    told so, exits 2 saying why, its result unsent."""
    plan, theirs = plan_of(tmp_path, ports, 1), plan_of(tmp_path, ports, 1, "lr=0.3")
    for name, which in (("nodes", plan), ("collector", theirs)):
        (tmp_path / name).mkdir()
        dataclasses.replace(which, results_key=plan.results_key).dump(
            tmp_path / name / "plan.json")
    collect = subprocess.Popen(
        [sys.executable, "-m", "launcher.cli", "collect", "--plan",
         str(tmp_path / "collector" / "plan.json"), "--out", str(tmp_path / "collected")],
        env=ENV_ROOT, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: listening(ports[2]) or collect.poll() is not None, 120, "the collector")
    node = subprocess.run(
        [sys.executable, "-m", "launcher.node_cli", "--plan", str(tmp_path / "nodes" / "plan.json"),
         "--node-id", "0", "--out", str(tmp_path / "host")], env=ENV_ROOT, cwd=ROOT,
        capture_output=True, text=True, timeout=300)
    _, err = collect.communicate(timeout=300)
    assert (collect.returncode, err) == (2, "dfl-launch: collect: node 0's plan differs in "
                                            "['protocol'] from this collector's; refusing to "
                                            "collect its results\n")
    assert not (tmp_path / "collected").exists()
    assert node.returncode == 2, node.stderr
    assert node.stderr.strip().splitlines()[-1] == (
        "dfl-node: node 0: the collector's plan differs in ['protocol']; refusing to send it "
        "results")


def test_a_failed_node_waits_for_the_collector_the_linger_only(tmp_path: Path,
                                                               ports: list[int]) -> None:
    """A node that ended its run waits for a collector as long as for the mesh to start
    (wire.rendezvous_s); one that failed, its `error` record emitted, exits after the linger
    with its own line, however long its plan would wait."""
    sink = ZmqRecordSink(plan_of(tmp_path, ports, 1, "wire.rendezvous_s=60"), 0, linger_ms=100)
    sink.emit({"type": "error", "node": 0, "message": "PlanError: refused"})
    with pytest.raises(NoCollector, match=r"within 0.1 s \(the linger\); 1 record\(s\)"):
        sink.close()


def test_a_sink_in_the_nodes_context_leaves_that_context_to_its_owner(tmp_path: Path,
                                                                      ports: list[int]) -> None:
    """A node runs every socket in one ZeroMQ context (launcher/node_cli.py) and destroys it
    last: a sink given that context closes its socket and leaves the context open, so the
    node's other sockets go on and what they queued still goes out."""
    plan = plan_of(tmp_path, ports, 1, "wire.rendezvous_s=0.1")
    context = zmq.Context()
    try:
        sink = ZmqRecordSink(plan, 0, linger_ms=100, context=context)
        with pytest.raises(NoCollector):
            sink.close()
        assert not context.closed
        other = context.socket(zmq.DEALER)  # the context still makes sockets
        other.close(linger=0)
    finally:
        context.destroy()
