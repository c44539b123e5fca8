"""A live mesh under attack on every listening socket: every hostile message that reaches the
application is dropped and counted under the reason fixed by how it was made, nothing crashes,
and the result is bit-identical to an undisturbed in-process run of the same plan.

The mesh is the one-node-per-host form on loopback (a ring of `dfl-node` processes and
`dfl-launch collect`), so that the last node can be an insider: the real node running the real
protocol, whose transport follows each data message with a hostile batch over its own
connection (tests/hostile.py). The test process attacks every node's ROUTER and the collector's
ROUTER from outside as well. What ZeroMQ refuses before the application sees it (a socket type
that cannot talk to the listener, a frame over its MAXMSGSIZE) is tallied apart.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import zmq

from dfl_node.plan import RunPlan
from dfl_node.runner.prephase_client import ANSWER_TAG, REPORT_TAG, limits_of
from dfl_node.transports.liveness import STALL_ENV
from dfl_node.transports.zeromq import routing_id
from dfl_node.wire.codec import encode
from launcher.config.host_plan import resolve_host_plan
from launcher.config.ports import PortClaims
from launcher.config.run_spec import RunSpec
from launcher.run.prephase_coordinator import Gathered, ZmqCoordinatorChannel, gather
from tests.harness import ENV_ROOT, ROOT, final_files, launch_ok
from tests.hostile import Tally, attack_collector, attack_node, garbled, wire_reason
from tests.proc_util import wait_for

MAX_MESSAGE_BYTES = 1 << 16  # the model's messages are ~2 KB; a larger frame is cut by ZeroMQ


@pytest.fixture
def ports(port_claims: PortClaims) -> list[int]:
    return port_claims.claim(7)


def ring(tmp_path: Path, ports: list[int], n: int) -> Path:
    """A ring of n >= 4 nodes on fixed loopback ports (so every node has a non-neighbour)."""
    nodes = [{"id": i, "host": "127.0.0.1", "port": ports[i]} for i in range(n)]
    path = tmp_path / f"ring{n}.yaml"
    path.write_text(json.dumps({"name": f"ring{n}", "nodes": nodes,
                                "edges": [[i, (i + 1) % n] for i in range(n)]}))
    return path


# The run must outlast the attack, which starts once round 0 is reported and takes about half a
# second here: node 0 computes for HOLD_S at the start of round 2 (its ZeroMQ threads still
# take every message in), so however fast the rounds, the attack ends while the mesh runs.
HOLD_S = 10
MESH_ENV = {**ENV_ROOT, STALL_ENV: f"0:2:{HOLD_S}"}


def options(rounds: int, collector_port: int) -> list[str]:
    return ["--dataset", "synthetic", "--partition", "iid", "--rounds", str(rounds),
            "--set", "model={name: mlp, hidden: [16]}",
            "--set", f"wire.max_message_bytes={MAX_MESSAGE_BYTES}",
            "--set", "wire.rendezvous_s=120",
            "--set", f"endpoints.collector=127.0.0.1:{collector_port}"]


def host_plan(topo: Path, opts: list[str]) -> RunPlan:
    sets = tuple(opts[i + 1] for i, flag in enumerate(opts) if flag == "--set")
    return resolve_host_plan(RunSpec(topology=str(topo), protocol="d-psgd",
                                     options={"dataset": "synthetic", "partition": "iid",
                                              "rounds": int(opts[opts.index("--rounds") + 1])},
                                     sets=sets))


def python(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], env=MESH_ENV, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def start_mesh(tmp_path: Path, plan_path: Path, ids: list[int]) -> list[subprocess.Popen]:
    """The collector, the honest nodes and the insider (the last id), as an operator would
    start them."""
    plan = str(plan_path)
    procs = [python("-m", "launcher.cli", "collect", "--plan", plan,
                    "--out", str(tmp_path / "collected"), "--timeout-s", "600")]
    procs += [python("-m", "launcher.node_cli", "--plan", plan, "--node-id", str(i))
              for i in ids[:-1]]
    procs.append(python("-m", "tests.hostile", str(tmp_path / "insider.json"),
                        "--plan", plan, "--node-id", str(ids[-1])))
    return procs


def attack(plan: RunPlan, per_category: int) -> tuple[dict[int, Tally], Tally]:
    """Every node's ROUTER, then the collector, from outside; the tallies of each."""
    rng = random.Random(2026)
    ctx = zmq.Context()
    try:
        nodes = {i: attack_node(ctx, plan, i, per_category, rng) for i in plan.ids}
        collector = attack_collector(ctx, plan, per_category, rng)
    finally:
        ctx.destroy(linger=2000)
    return nodes, collector


def run_under_attack(tmp_path: Path, ports: list[int], n: int, rounds: int,
                     per_category: int) -> None:
    topo = ring(tmp_path, ports, n)
    opts = options(rounds, ports[6])
    plan_path = tmp_path / "run" / "plan.json"
    plan_path.parent.mkdir()
    plan = host_plan(topo, opts)
    plan.dump(plan_path)
    procs = start_mesh(tmp_path, plan_path, list(plan.ids))
    metrics = tmp_path / "collected" / "metrics.jsonl"
    wait_for(lambda: metrics.exists() and metrics.read_text().count("\n") >= n, 300, "round 0")
    outsiders, collector = attack(plan, per_category)
    # Counting is exact only for what the nodes read: the run must outlast the attack.
    assert all(p.poll() is None for p in procs), "the run ended before the attack did"
    errors = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), errors

    reference = launch_ok(tmp_path / "inproc", str(topo), "d-psgd", "--transport", "inproc",
                          *opts)
    assert reference["rejected_messages"] == {}
    assert final_files(tmp_path / "run") == final_files(tmp_path / "inproc")
    summary = json.loads((tmp_path / "collected" / "summary.json").read_text())
    assert summary["ledger"]["per_round"] == reference["ledger"]["per_round"]

    insider = json.loads((tmp_path / "insider.json").read_text())
    ledger = json.loads((tmp_path / "collected" / "ledger.json").read_text())
    expected_total: Counter[str] = Counter(collector.delivered)
    for node in plan.ids:
        expected = outsiders[node].delivered + Counter(insider["expected"].get(str(node), {}))
        assert ledger[str(node)]["rejected"] == dict(expected), node
        expected_total.update(expected)
    assert summary["rejected_messages"] == dict(sorted(expected_total.items()))
    assert summary["rejected_records"] == dict(sorted(collector.delivered.items()))

    total = Tally()
    for tally in (*outsiders.values(), collector):
        total.add(tally)
    insider_sent = sum(insider["categories"].values())
    print(f"\nhostile: {sum(total.sent.values()) + insider_sent} messages; outsiders per "
          f"category {dict(total.sent)}; insider per category {insider['categories']}; "
          f"rejected by reason {summary['rejected_messages']}; refused below the "
          f"application {dict(total.below)}")


def test_a_mesh_under_attack_counts_every_message_and_computes_the_clean_result(
        tmp_path: Path, ports: list[int]) -> None:
    run_under_attack(tmp_path, ports, n=4, rounds=20, per_category=25)


@pytest.mark.slow
def test_ten_thousand_hostile_messages_change_nothing(tmp_path: Path, ports: list[int]) -> None:
    run_under_attack(tmp_path, ports, n=6, rounds=100, per_category=240)


def test_the_prephase_coordinator_counts_what_it_refuses(tmp_path: Path, ports: list[int]) -> None:
    """The third kind of listening socket (SSD-FL's coordinator), attacked while it gathers:
    each refused message counted under its reason, the reports it keeps the honest ones."""
    topo = ring(tmp_path, ports, 4)
    plan = resolve_host_plan(RunSpec(topology=str(topo), protocol="ssd-fl",
                                     options={"dataset": "synthetic"},
                                     sets=(f"endpoints.collector=127.0.0.1:{ports[5]}",
                                           f"endpoints.coordinator=127.0.0.1:{ports[6]}",
                                           "model={name: mlp}")))
    limits, rng = limits_of(plan.required_prephase()), random.Random(7)
    report = {i: [bytes(f) for f in encode(i, REPORT_TAG, {"x": np.full(3, i, np.float32)})]
              for i in plan.ids}
    garbage = [garbled(rng, report[0], limits) for _ in range(20)]
    hostile = {
        None: [report[0]] * 10,  # an anonymous connection claiming node 0
        routing_id(99): [report[0]] * 10,  # an id that is no node of the plan
        routing_id(0): [*garbage, *[[bytes(f) for f in encode(1, REPORT_TAG, {})]] * 10,
                        *[[bytes(f) for f in encode(0, ANSWER_TAG, {})]] * 10,
                        report[0], *[report[0]] * 10],  # the last ten: duplicates
    }
    expected = Counter({"not_a_node": 20, "src_mismatch": 10, "bad_tag": 10, "duplicate": 10})
    expected.update(str(wire_reason(g, limits)) for g in garbage)
    channel = ZmqCoordinatorChannel(plan.required_prephase().bind,
                                    plan.required_prephase().max_bytes)
    read = []  # every message the coordinator read
    channel_recv = channel.recv

    def recv(timeout_s: float) -> tuple[int, list] | None:
        arrival = channel_recv(timeout_s)
        if arrival is not None:
            read.append(arrival)
        return arrival

    channel.recv = recv  # type: ignore[method-assign]
    result: list[Gathered] = []
    worker = threading.Thread(target=lambda: result.append(gather(plan, channel, 60)))
    worker.start()
    ctx = zmq.Context()
    try:
        for identity, messages in hostile.items():
            sock = ctx.socket(zmq.DEALER)
            if identity is not None:
                sock.setsockopt(zmq.ROUTING_ID, identity)
            sock.connect(plan.required_prephase().address)
            for frames in messages:
                sock.send_multipart(frames)
        # The coordinator reads all of that before the last reports arrive.
        sent = sum(len(messages) for messages in hostile.values())
        wait_for(lambda: len(read) == sent, 60, "the coordinator reading the hostile messages")
        for i in plan.ids[1:]:
            sock = ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.ROUTING_ID, routing_id(i))
            sock.connect(plan.required_prephase().address)
            sock.send_multipart(report[i])
        worker.join(60)
    finally:
        ctx.destroy(linger=0)
        channel.close()
    gathered = result[0]
    assert gathered.rejected == expected
    assert {i: float(r["x"][0]) for i, r in gathered.reports.items()} == {
        i: float(i) for i in plan.ids}
