"""Liveness along graph edges: ZMTP heartbeats answered by libzmq's I/O thread, so a busy
process is alive and a stopped or killed one is dead; `Comm` turns a dead neighbour into
`PeerDead` (or, tolerating deaths, into a suspect); the surviving graph's arithmetic."""

from __future__ import annotations

import dataclasses
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zmq

from dfl_node.comm.channel import Comm
from dfl_node.ledgers.traffic import Ledger
from dfl_node.plan import RunPlan
from dfl_node.runner.membership import SurvivingGraph
from dfl_node.transports.liveness import CROWD_FREE, Heartbeat, PeerDead
from dfl_node.transports.zeromq import ZmqTransport
from dfl_node.wire.codec import WireLimits
from dfl_node.wire.tags import Tag
from launcher.backends.compose import ComposeOptions, write_compose
from launcher.config.ports import PortClaims
from launcher.config.run_spec import RunSpec
from launcher.node_cli import host_crowd
from tests.harness import ENV_ROOT, ROOT
from tests.proc_util import wait_for

DEADLINE_S = 2.0
LIMITS = WireLimits(max_tensors=8, max_message_bytes=1 << 20)

# A neighbour in its own process: node 1 of a two-node mesh, then a busy loop that holds the GIL
# (pure Python) for `argv[3]` seconds without ever reading its socket, then it says "idle" and
# sleeps.
PEER = """
import sys, time
from dfl_node.transports.liveness import Heartbeat
from dfl_node.transports.zeromq import ZmqTransport
t = ZmqTransport(1, sys.argv[1], {0: sys.argv[2]}, max_message_bytes=1 << 20,
                 heartbeat=Heartbeat(float(sys.argv[4])))
print("up", flush=True)
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    pass
print("idle", flush=True)
time.sleep(3600)
"""


@pytest.fixture
def peer_process(port_claims: PortClaims):
    """(transport of node 0, the peer's Popen, how long the peer stays busy)."""
    mine, theirs = (f"tcp://127.0.0.1:{p}" for p in port_claims.claim(2))
    busy_s = 3 * DEADLINE_S
    proc = subprocess.Popen([sys.executable, "-c", PEER, theirs, mine, str(busy_s),
                             str(DEADLINE_S)], env=ENV_ROOT, cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    transport = ZmqTransport(0, mine, {1: theirs}, max_message_bytes=1 << 20,
                             heartbeat=Heartbeat(DEADLINE_S))
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"
        assert transport.liveness is not None
        wait_for(lambda: transport.liveness.connected(1), 30, "the connection")
        transport.liveness.arm()
        yield transport, proc, busy_s
    finally:
        proc.kill()
        proc.wait()
        transport.drop_peer(1)
        transport.close()


def test_a_busy_neighbour_is_alive_a_stopped_one_dead_a_killed_one_dead(peer_process) -> None:
    transport, proc, busy_s = peer_process
    watch = transport.liveness
    assert proc.stdout is not None

    def idle() -> bool:
        """Whether the peer's busy loop (three deadlines of pure-Python work) is over; it must
        be alive at every look until then."""
        assert not watch.dead(1)
        return bool(select.select([proc.stdout], [], [], 0)[0])

    wait_for(idle, 10 * busy_s, "the peer's busy loop to end")
    assert proc.stdout.readline() == "idle\n"
    os.kill(proc.pid, signal.SIGSTOP)
    wait_for(lambda: watch.dead(1), 10 * DEADLINE_S, "the stopped peer declared dead")
    os.kill(proc.pid, signal.SIGCONT)
    wait_for(lambda: not watch.dead(1), 10 * DEADLINE_S, "the peer answering again")
    proc.kill()
    wait_for(lambda: watch.dead(1), 10 * DEADLINE_S, "the killed peer declared dead")
    beats = watch.traffic()[1]
    assert beats["messages"] >= 2 * int(busy_s / (DEADLINE_S / 10)) - 4
    assert beats["bytes"] == beats["messages"] // 2 * 16


def test_comm_names_a_dead_neighbour_or_suspects_it(peer_process) -> None:
    transport, proc, _ = peer_process
    comm = Comm(0, [1], transport, LIMITS, Ledger(0), recv_timeout_s=300.0)
    comm.liveness = transport.liveness
    proc.kill()
    with pytest.raises(PeerDead, match=r"node 0: neighbour\(s\) \[1\] stopped answering") as err:
        comm.recv(1, Tag("data", 0, "x"))
    assert err.value.peers == (1,)  # named dead, long before the receive timeout (300 s)
    comm.tolerate_deaths = True
    assert comm.exchange(Tag("data", 0, "y"), {"v": np.zeros(1, np.float32)}) == {}
    assert comm.suspects == {1}
    assert comm.ledger.totals("data")["sent"]["messages"] == 1  # sent, then not waited for
    comm.drop_neighbors({1})
    assert comm.neighbors == () and comm.suspects == set()


def test_heartbeat_timings_follow_the_deadline() -> None:
    beat = Heartbeat(10.0)
    assert (beat.interval_ms, beat.timeout_ms, beat.grace_s) == (1000, 4000, 5.0)
    assert Heartbeat.of({}).deadline_s == 10.0
    assert Heartbeat.of({"deadline_s": 3}).grace_s == 1.5


def test_a_crowded_host_stretches_the_deadline() -> None:
    assert Heartbeat.of({}, crowd=10).deadline_s == 10.0  # ring20 on 2 cores
    assert Heartbeat.of({}, crowd=CROWD_FREE).deadline_s == 10.0
    assert Heartbeat.of({}, crowd=250).deadline_s == 50.0  # ring500 on 2 cores
    assert Heartbeat.of({"deadline_s": 2}, crowd=4 * CROWD_FREE).timeout_ms == 3200


def test_the_crowd_counts_the_plans_nodes_on_one_host(tmp_path: Path) -> None:
    write_compose(RunSpec(topology="ring20", protocol="d-psgd"), ComposeOptions(tmp_path))
    plan = RunPlan.load(tmp_path / "run" / "plan.json")  # one host per node: node-<id>
    assert host_crowd(plan, "node-3") == 1 / (os.cpu_count() or 1)
    assert host_crowd(plan, "elsewhere") == 0
    crowded = dataclasses.replace(plan, nodes=tuple(dataclasses.replace(n, host="one")
                                                    for n in plan.nodes))
    assert host_crowd(crowded, "one") == 20 / (os.cpu_count() or 1)


def test_the_surviving_graph_of_a_ring() -> None:
    ring = SurvivingGraph.of(range(20), [(i, (i + 1) % 20) for i in range(20)])
    assert ring.diameter() == 10
    assert ring.flood_steps() == 18  # the diameter of the ring without one node
    gone = ring.without(7)
    assert gone.dead == (7,) and len(gone.edges) == 18 and gone.diameter() == 18
    assert gone.neighbors(6) == [5] and gone.neighbors(8) == [9]
    row = gone.metropolis_row(6)
    assert row == pytest.approx({5: 1 / 3, 6: 2 / 3}, abs=1e-15) and list(row) == [5, 6]
    for node in gone.ids:
        assert sum(gone.metropolis_row(node).values()) == pytest.approx(1.0, abs=1e-15)
    assert [len(c) for c in gone.without(15).components()] == [11, 7]
    line = SurvivingGraph.of(range(5), [(0, 1), (1, 2), (2, 3), (3, 4)])
    assert line.flood_steps() == 4  # only removing an end keeps a line connected


def test_heartbeats_are_kept_apart_from_the_training_ledger() -> None:
    ledger = Ledger(0)
    ledger.record_send(1, Tag("data", 0, "gossip"), 400, 90)
    ledger.record_heartbeats({1: {"messages": 20, "bytes": 160}})
    assert ledger.wire_bytes() == 490
    assert ledger.totals("control")["sent"]["messages"] == 0
    assert ledger.to_json()["heartbeats"] == {"1": {"messages": 20, "bytes": 160}}
    assert list(ledger.per_round()) == [0]


WEDGED: list[zmq.Context] = []  # contexts a failed test leaves: terminating one would hang


def test_a_closed_transport_leaves_the_nodes_context_working(port_claims: PortClaims) -> None:
    """Every socket of a node shares one ZeroMQ context (launcher/node_cli.py). A closed
    transport's DEALER lingers while it holds a message for a neighbour that is away; when
    the neighbour is back, that connection must raise no monitor event, whose reader the
    liveness watch closed: libzmq's I/O thread sends each event blocking, so it would stop
    there for good, and with it the node's other sockets (its results to the collector)."""
    mine, theirs, elsewhere = (f"tcp://127.0.0.1:{p}" for p in port_claims.claim(3))
    context, outside = zmq.Context(), zmq.Context()
    try:
        neighbour = outside.socket(zmq.ROUTER)
        neighbour.bind(theirs)
        transport = ZmqTransport(0, mine, {1: theirs}, max_message_bytes=1 << 20,
                                 heartbeat=Heartbeat(DEADLINE_S), context=context)
        assert transport.liveness is not None
        wait_for(lambda: transport.liveness.connected(1), 30, "the neighbour connected")
        neighbour.close(linger=0)
        wait_for(lambda: not transport.liveness.connected(1), 30, "the neighbour gone")
        transport.send(1, [b"queued while away"])
        transport.close()
        neighbour = outside.socket(zmq.ROUTER)
        neighbour.bind(theirs)
        assert neighbour.poll(30_000), "the lingering DEALER never delivered"
        probe, listener = context.socket(zmq.DEALER), outside.socket(zmq.ROUTER)
        listener.bind(elsewhere)
        probe.connect(elsewhere)
        probe.send(b"still working")
        assert listener.poll(30_000), "the node's context stopped"
    except BaseException:
        WEDGED.append(context)
        raise
    context.destroy(linger=0)
    outside.destroy(linger=0)
