"""Rendezvous: a node waits for late neighbours until its deadline, not its receive timeout."""

from __future__ import annotations

import threading
import time

import pytest

from dfl_node.comm.channel import Comm
from dfl_node.comm.rendezvous import RendezvousTimeout
from dfl_node.ledgers.traffic import Ledger
from dfl_node.plan import RunPlan
from dfl_node.runner.run_node import meet_mesh
from dfl_node.settings.data_section import DataSection
from dfl_node.settings.link import LinkSettings
from dfl_node.settings.wire import WireSettings, rendezvous_seconds
from dfl_node.transports.zeromq import ZmqTransport
from dfl_node.wire.codec import WireLimits
from launcher.config.ports import PortClaims
from tests.harness import SYNTHETIC_DATA

LIMITS = WireLimits(max_tensors=4, max_message_bytes=1 << 20)
LATE_S = 2.5  # five receive timeouts


def line_plan(wire: dict) -> RunPlan:
    """Nodes 0 - 1 - 2 (diameter 2, so the start barrier takes two hops)."""
    return RunPlan(protocol="d-psgd", topology_name="line3",
                   topology={"nodes": [{"id": i} for i in range(3)], "edges": [[0, 1], [1, 2]]},
                   nodes=(), mixing="metropolis", weights=(), rounds=1, seed=0, eval_every=1,
                   data=DataSection.model_validate(SYNTHETIC_DATA), model={}, hyper={},
                   link=LinkSettings(), wire=WireSettings.model_validate(wire), transport="zmq",
                   collector="")


@pytest.fixture
def addresses(port_claims: PortClaims) -> dict[int, str]:
    return {i: f"tcp://127.0.0.1:{port}" for i, port in enumerate(port_claims.claim(3))}


def start(plan: RunPlan, node: int, addresses: dict[int, str], delay_s: float,
          outcome: dict[int, object]) -> threading.Thread:
    """Node `node` binds after `delay_s`, then meets the mesh; its outcome lands in `outcome`:
    its receive timeout afterwards, or its RendezvousTimeout's message."""

    def body() -> None:
        time.sleep(delay_s)
        peers = {j: addresses[j] for j in plan.neighbors(node)}
        transport = ZmqTransport(node, addresses[node], peers, max_message_bytes=1 << 20,
                                 linger_ms=1000)
        comm = Comm(node, plan.neighbors(node), transport, LIMITS, Ledger(node),
                    recv_timeout_s=plan.wire.recv_timeout_s)
        try:
            meet_mesh(comm, plan)
            outcome[node] = comm.recv_timeout_s
        except RendezvousTimeout as exc:
            outcome[node] = str(exc)
        finally:
            transport.close()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def test_the_deadline_defaults_to_the_receive_timeout() -> None:
    assert rendezvous_seconds({"recv_timeout_s": 7}) == 7.0
    assert rendezvous_seconds({"recv_timeout_s": 7, "rendezvous_s": None}) == 7.0
    assert rendezvous_seconds({"recv_timeout_s": 7, "rendezvous_s": 90}) == 90.0


def test_a_node_started_late_is_waited_for_until_the_deadline(addresses) -> None:
    plan = line_plan({"recv_timeout_s": 0.5, "rendezvous_s": 30})
    outcome: dict[int, object] = {}
    threads = [start(plan, 2, addresses, 0.0, outcome), start(plan, 0, addresses, 0.2, outcome),
               start(plan, 1, addresses, LATE_S, outcome)]
    for t in threads:
        t.join(60)
    assert sorted(outcome) == [0, 1, 2]
    # Node 1 bound at least LATE_S (five receive timeouts) after the others began to wait for
    # it: that they met it at all means they waited past their receive timeout. The ordinary
    # receive timeout is back for the rounds.
    assert outcome == dict.fromkeys([0, 1, 2], 0.5), outcome


def test_a_neighbour_missing_at_the_deadline_is_named(addresses) -> None:
    plan = line_plan({"recv_timeout_s": 30, "rendezvous_s": 1.0})
    outcome: dict[int, object] = {}
    start(plan, 0, addresses, 0.0, outcome).join(30)
    assert outcome == {0: "node 0: node(s) [1] did not join within the rendezvous deadline "
                          "(1 s, wire.rendezvous_s)"}

