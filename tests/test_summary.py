"""Summary arithmetic: fairness figures, protocol keys, formula bits, the plan's diameter,
start-up times and the collector batches behind them."""

from __future__ import annotations

import math
import queue
from pathlib import Path

import msgpack
import pytest

from dfl_node.ledgers.formula import FormulaLedger
from dfl_node.runner.records import DoneRecord
from launcher.config.layers import resolve_config
from launcher.config.planner import build_plan
from launcher.config.ports import PortClaims
from launcher.run.collector import Collector, QueueSource
from launcher.run.fairness import fairness
from launcher.run.summary import first_round_seconds, formula_tables, mean_over_nodes
from topologies.loader import load_topology, resolve_topology_path


def test_fairness_figures_by_hand() -> None:
    accs = [0.9, 0.5, 0.7, 0.8, 0.6, 0.9, 0.4, 0.8, 0.7, 0.6, 0.3]  # n = 11 -> tail of 2
    losses = [0.2, 1.5, 0.6, 0.4, 0.9, 0.1, 2.0, 0.3, 0.5, 0.8, 2.5]
    got = fairness(accs, losses)
    mean = sum(accs) / 11
    assert got["bottom10_accuracy"] == pytest.approx((0.3 + 0.4) / 2)
    assert got["std_accuracy"] == pytest.approx(math.sqrt(sum((a - mean) ** 2 for a in accs) / 11))
    assert got["jain_index"] == pytest.approx(sum(accs) ** 2 / (11 * sum(a * a for a in accs)))
    assert got["cvar10_loss"] == pytest.approx((2.5 + 2.0) / 2)
    assert fairness([0.5] * 4, [1.0] * 4)["jain_index"] == pytest.approx(1.0)


def test_protocol_keys_are_averaged_over_nodes() -> None:
    reports = [{"trigger_rate": 0.5, "selected_histogram": {"3": 2.0}},
               {"trigger_rate": 1.0, "selected_histogram": {"3": 1.0, "4": 1.0}}]
    assert mean_over_nodes(reports) == {"trigger_rate": 0.75,
                                        "selected_histogram": {"3": 1.5, "4": 0.5}}


def test_formula_bits_sum_per_round_component_and_client() -> None:
    done: dict[int, DoneRecord] = {}
    for node in (0, 1):
        ledger = FormulaLedger(node)
        ledger.charge(0, 1 - node, "psi", 37)
        ledger.charge(1, 1 - node, "values", 8 * (node + 1))
        done[node] = DoneRecord(node=node, ledger={}, formula=ledger.to_json())
    tables = formula_tables(done, 2)
    assert tables["per_round"] == {"0": {"psi": 74}, "1": {"values": 24}}
    assert tables["per_client"] == {"0": 45, "1": 53}
    assert tables["bits_per_client"] == 49.0


@pytest.mark.parametrize(("name", "diameter"), [("ring20", 10), ("er20-p05", 2),
                                                ("rgg20-r04", 4), ("complete10", 1)])
def test_plan_diameter_matches_the_topology(name: str, diameter: int) -> None:
    topo = load_topology(resolve_topology_path(name))
    config = resolve_config("d-psgd", None, {"dataset": "synthetic"}, ())
    claims = PortClaims()
    try:
        plan = build_plan(topo, config, claims)
    finally:
        claims.release()
    assert plan.diameter() == topo.diameter() == diameter
    assert plan.adjacency() == {i: plan.neighbors(i) for i in plan.ids}


def test_first_round_seconds_counts_from_the_start_to_the_last_node() -> None:
    done = {0: DoneRecord(node=0, ledger={}, first_round_at=105.5),
            1: DoneRecord(node=1, ledger={}, first_round_at=107.25),
            2: DoneRecord(node=2, ledger={})}
    assert first_round_seconds(done, 100.0) == 7.25
    assert first_round_seconds({0: done[2]}, 100.0) is None


def test_pump_all_takes_every_queued_record_at_once(tmp_path: Path) -> None:
    """With 200 nodes the launcher checks its children between pumps; one record per pump
    left `ready` records queued, and their times late."""
    sink: queue.Queue = queue.Queue()
    collector = Collector(QueueSource(sink), tmp_path, [0, 1, 2])
    for node in (0, 1, 2):
        sink.put(msgpack.packb({"type": "ready", "node": node, "pid": 1}))
    try:
        assert collector.pump_all(0.1) == 3
        assert sorted(collector.ready_at) == [0, 1, 2]
        assert collector.pump_all(0.01) == 0
    finally:
        collector.close()
