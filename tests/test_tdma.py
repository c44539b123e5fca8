"""The TDMA scheduler: a worked example, invariants on RGG graphs, slots on the wire."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest
import torch

from dfl_node.comm.channel import Comm
from dfl_node.ledgers.traffic import Ledger
from dfl_node.netsim import radio
from dfl_node.netsim.tdma import (
    TdmaSchedule,
    build_schedule,
    conflicts,
    directed_links,
    frame_seconds,
    node_positions,
    plan_section,
    schedule_from_plan,
)
from dfl_node.netsim.virtual_clock import LinkModel
from dfl_node.plan import PlanError, RunPlan
from dfl_node.runner.run_node import agree_on_plan
from dfl_node.settings.data_section import DataSection
from dfl_node.settings.link import LinkSettings
from dfl_node.settings.schedule import ScheduleSection
from dfl_node.settings.wire import WireSettings
from dfl_node.transports.inproc import InprocHub, InprocTransport
from dfl_node.wire.codec import Frame, WireLimits, decode
from dfl_node.wire.tags import Tag
from tests.harness import SYNTHETIC_DATA
from topologies.generators import random_geometric

# docs/protocols/dsc.md#worked-example.
SPEC_POS = {0: (0.0, 0.0), 1: (1.0, 0.0), 2: (1.0, 1.0), 3: (2.0, 1.0)}
SPEC_EDGES = [(0, 1), (1, 2), (2, 3), (0, 2)]
SPEC_SLOTS = {
    0: [[(0, 2)], [(1, 2)], [(2, 0)], [(2, 1)], [(0, 1), (2, 3)], [(1, 0), (3, 2)]],
    1: [[(0, 2)], [(1, 2)], [(2, 0)], [(2, 1)], [(0, 1), (3, 2)], [(1, 0), (2, 3)]],
}
SPEC_LOSS = {(2, 3): 0.5, (3, 2): 0.2, (0, 2): 0.1}


@pytest.mark.parametrize("r_i", [0, 1])
def test_spec_vector_slots_and_frame_length(r_i: int) -> None:
    schedule = build_schedule(SPEC_EDGES, SPEC_POS, r_i)
    assert [list(slot) for slot in schedule.slots] == SPEC_SLOTS[r_i]
    assert schedule.frame_length == 6


@pytest.mark.parametrize("r_i", [0, 1])
def test_spec_vector_frame_latency(r_i: float) -> None:
    """K = 10 packets, l_pkt = 1: link latencies 20, 12.5, 11.111, 10; frame 73.611."""
    schedule = build_schedule(SPEC_EDGES, SPEC_POS, r_i)
    latency = {link: radio.expected_transmissions(10, SPEC_LOSS.get(link, 0.0)) * 1.0
               for link in directed_links(SPEC_EDGES)}
    assert latency[(2, 3)] == 20 and latency[(3, 2)] == 12.5
    assert latency[(0, 2)] == pytest.approx(11.111, abs=1e-3)
    assert frame_seconds(schedule, latency) == pytest.approx(73.611, abs=1e-3)


def test_link_model_charges_eq5_per_link() -> None:
    """The clock's link formula: latency + K l_pkt / (1 - p), with l_pkt = 8 L_pkt / bandwidth;
    with l_pkt = 1 s and no latency it gives the worked example's 11.111 for K = 10, p = 0.1."""
    topology = {"nodes": [{"id": 0}, {"id": 1}],
                "edges": [{"u": 0, "v": 1, "loss": 0.1}]}
    link = {"latency_ms": 0.0, "bandwidth_mbps": 8 * 1500 / 1e6}
    model = LinkModel.from_plan(topology, link)
    stats = model.carry((0, 1), 10 * 1500, frame=0)
    assert stats.packets == 10 and stats.seconds == pytest.approx(100 / 9)
    assert model.carry((1, 0), 10 * 1500 - 1499, frame=0).packets == 10
    assert model.carry((1, 0), 0, frame=0).seconds == 0


def rgg_cases() -> list[tuple[int, int, float]]:
    return [(n, seed, factor) for n in (10, 20, 30) for seed in (0, 1) for factor in (0, 1, 2)]


@pytest.mark.parametrize(("n", "seed", "factor"), rgg_cases())
def test_rgg_schedules_are_valid_colourings(n: int, seed: int, factor: float) -> None:
    topo = random_geometric(n, 0.05, seed=seed, grow=True).to_dict()
    section = plan_section(topo, "tdma", {"interference_factor": factor})
    schedule = TdmaSchedule(section.slots)
    positions = node_positions(topo)
    assert positions is not None
    r_i = section.interference_range
    assert r_i is not None
    assert r_i == pytest.approx(factor * topo["generator"]["grown_radius"])
    for slot in schedule.slots:  # (i) no two links of a slot conflict
        for k, l1 in enumerate(slot):
            assert not any(conflicts(l1, l2, positions, r_i) for l2 in slot[k + 1:])
    edges = [tuple(e) for e in topo["edges"]]
    scheduled = [link for slot in schedule.slots for link in slot]
    assert sorted(scheduled) == directed_links(edges)  # (ii) each link exactly once
    assert len(scheduled) == 2 * len(edges)
    degree = np.bincount(np.array(edges).ravel(), minlength=n)
    assert schedule.frame_length >= 2 * degree.max()  # (iii)
    if factor == 2:  # a wider interference range never needs fewer slots than none at all
        bare = build_schedule(edges, None, 0.0)
        assert schedule.frame_length >= bare.frame_length


def test_without_positions_the_interference_rule_is_skipped() -> None:
    topo = {"nodes": [{"id": i} for i in range(4)], "edges": [[0, 1], [2, 3]]}
    section = plan_section(topo, "tdma", {"interference_range": 5.0})
    assert section.interference_range is None
    assert section.slots == (((0, 1), (2, 3)), ((1, 0), (3, 2)))
    placed = {**topo, "nodes": [{"id": i, "position": [float(i), 0.0]} for i in range(4)]}
    assert plan_section(placed, "tdma", {"interference_range": 5.0}).frame_length == 4


@pytest.mark.parametrize(("mode", "options", "needle"), [
    ("bogus", {}, "schedule must be one of sync, tdma"),
    ("tdma", {"interference_range": -1}, "interference_range"),
    ("tdma", {"range": 1}, "unknown key"),
])
def test_bad_schedule_options(mode: str, options: dict, needle: str) -> None:
    topo = {"nodes": [{"id": 0}, {"id": 1}], "edges": [[0, 1]]}
    with pytest.raises(ValueError, match=needle):
        plan_section(topo, mode, options)


def test_a_node_refuses_a_plan_whose_slots_it_does_not_compute() -> None:
    topo = {"nodes": [{"id": 0}, {"id": 1}], "edges": [[0, 1]]}
    section = plan_section(topo, "tdma", {})
    assert schedule_from_plan(topo, section) == TdmaSchedule((((0, 1),), ((1, 0),)))
    swapped = section.model_copy(update={"slots": (((1, 0),), ((0, 1),))})
    with pytest.raises(ValueError, match="slots differ"):
        schedule_from_plan(topo, swapped)
    assert schedule_from_plan(topo, ScheduleSection(mode="sync")) is None


LIMITS = WireLimits(max_tensors=4, max_message_bytes=1 << 20)
STAR = {2: (0, 1, 3), 0: (2,), 1: (2,), 3: (2,)}


class Recorder:
    """A transport that keeps what is sent, in order."""

    node_id = 2
    liveness = None

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []

    def send(self, dst: int, frames: Sequence[Frame]) -> None:
        self.sent.append((dst, decode(frames, LIMITS).tag.slot))

    def discard(self, peer: int) -> None:
        pass

    def drop_peer(self, peer: int) -> None:
        pass

    def recv(self, timeout_s: float) -> None:
        return None

    def flush(self, timeout_s: float) -> tuple[int, ...]:
        return ()

    def close(self) -> None:
        pass


def test_a_node_sends_in_slot_order_stamping_each_link_colour() -> None:
    schedule = build_schedule([(0, 2), (1, 2), (2, 3)], None, 0.0)
    transport = Recorder()
    comm = Comm(2, STAR[2], transport, LIMITS, Ledger(2), schedule=schedule)
    comm.broadcast(Tag("data", 0, "g"), {"w": torch.zeros(3)})
    expected = schedule.send_order(2)
    assert transport.sent == [(dst, slot) for slot, dst in expected]
    assert [slot for _, slot in transport.sent] == sorted(slot for _, slot in transport.sent)
    assert {dst for dst, _ in transport.sent} == {0, 1, 3}
    comm.broadcast(Tag("ctrl", 0, "hello"), {})  # control traffic is not scheduled
    assert [slot for _, slot in transport.sent[3:]] == [0, 0, 0]
    comm.send(3, Tag("data", 0, "p2p"), {"w": torch.zeros(3)})
    assert transport.sent[-1] == (3, schedule.colour((2, 3))) != (3, 0)
    with pytest.raises(ValueError, match="runtime sets the slot"):
        comm.broadcast(Tag("data", 0, "g", slot=1), {"w": torch.zeros(3)})


def pair_exchange(schedules: dict[int, TdmaSchedule]) -> tuple[dict[int, Comm], dict]:
    hub = InprocHub([0, 1])
    frames: dict[int, list] = {0: [], 1: []}
    comms = {i: Comm(i, [1 - i], InprocTransport(i, hub, [1 - i]), LIMITS, Ledger(i),
                     recv_timeout_s=10, schedule=schedules[i], on_frame=frames[i].append)
             for i in (0, 1)}
    got: dict[int, dict] = {}

    def run(i: int) -> None:
        got[i] = comms[i].exchange(Tag("data", 0, "g"), {"w": torch.full((5,), float(i))})

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0][1]["w"].tolist() == [1.0] * 5 and got[1][0]["w"].tolist() == [0.0] * 5
    return comms, frames


def test_receivers_check_slots_and_count_mismatches() -> None:
    same = build_schedule([(0, 1)], None, 0.0)
    comms, frames = pair_exchange({0: same, 1: same})
    assert [c.slot_mismatches for c in comms.values()] == [0, 0]
    assert frames[0] == [{(0, 1): 20, (1, 0): 20}]  # the payload bytes that crossed
    other = TdmaSchedule(tuple(reversed(same.slots)))
    comms, _ = pair_exchange({0: same, 1: other})
    assert [c.slot_mismatches for c in comms.values()] == [1, 1]


def make_plan(schedule: ScheduleSection) -> RunPlan:
    return RunPlan(protocol="d-psgd", topology_name="pair",
                   topology={"nodes": [{"id": 0}, {"id": 1}], "edges": [[0, 1]]}, nodes=(),
                   mixing="metropolis", weights=(), rounds=1, seed=0, eval_every=1,
                   data=DataSection.model_validate(SYNTHETIC_DATA), model={}, hyper={},
                   link=LinkSettings(), wire=WireSettings(), transport="inproc", collector="",
                   schedule=schedule)


def test_plans_with_other_schedules_differ_in_the_schedule_hash_and_refuse_to_start() -> None:
    topo = make_plan(ScheduleSection())
    tdma = make_plan(plan_section(topo.topology, "tdma", {}))
    sync = make_plan(ScheduleSection(mode="sync"))
    a, b = tdma.section_hashes(), sync.section_hashes()
    assert [k for k in a if a[k] != b[k]] == ["schedule"]
    assert agree({0: tdma, 1: replace(tdma, seed=0)}) == {}
    assert agree({0: tdma, 1: sync}) == {
        i: f"node {i}: node {1 - i}'s plan differs in ['schedule']; refusing to start"
        for i in (0, 1)}


def agree(plans: dict[int, RunPlan]) -> dict[int, str]:
    """Run the start-up plan check on a pair of nodes; their errors by node."""
    hub = InprocHub([0, 1])
    comms = {i: Comm(i, [1 - i], InprocTransport(i, hub, [1 - i]), LIMITS, Ledger(i),
                     recv_timeout_s=10) for i in (0, 1)}
    errors: dict[int, str] = {}

    def run(i: int) -> None:
        try:
            agree_on_plan(comms[i], plans[i])
        except PlanError as exc:
            errors[i] = str(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_a_schedule_that_does_not_match_the_neighbours_is_refused() -> None:
    schedule = build_schedule([(0, 2), (1, 2), (2, 3)], None, 0.0)
    with pytest.raises(ValueError, match="not its neighbours"):
        Comm(2, (0, 1), Recorder(), LIMITS, Ledger(2), schedule=schedule)
