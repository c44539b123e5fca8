"""dsc and its baselines as real meshes: exactness across transports, what travels, the time line,
the recorded policies and Delta_all (docs/protocols/dsc.md, #a2, #a4)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protocols.dsc.delta import delta_report
from tests.harness import Exited, assert_transports_identical, launch_ok

# The graph and portfolios of docs/protocols/dsc.md#worked-example, a lossy and a slow edge.
SPEC4 = """\
name: spec4
nodes:
  - {id: 0, position: [0.0, 0.0], tasks: [seg, sn, dep]}
  - {id: 1, position: [1.0, 0.0], tasks: [seg, dep]}
  - {id: 2, position: [1.0, 1.0], tasks: [sn, dep]}
  - {id: 3, position: [2.0, 1.0], tasks: [seg]}
edges:
  - [0, 1]
  - {u: 1, v: 2, latency_ms: 3.0}
  - {u: 2, v: 3, loss: 0.5}
  - {u: 0, v: 2, loss: 0.1, bandwidth_mbps: 20.0}
"""
EDGE = {(0, 1): (1.0, 100.0, 0.0), (1, 2): (3.0, 100.0, 0.0), (2, 3): (1.0, 100.0, 0.5),
        (0, 2): (1.0, 20.0, 0.1)}
ROUNDS, DEPTH, K = 2, 3, 8
SHARED = 66_232  # the mini backbone's `shared` group (docs/protocols/dsc.md)
TINY = ("--rounds", str(ROUNDS), "--eval-every", str(ROUNDS),
        "--set", "scenes={size: 16, train_size: 60, test_size: 16, min_size: 12}",
        "--set", f"hyper.depth={DEPTH}", "--set", "hyper.epochs=1",
        "--set", "tdma.interference_range=1",
        # policies learned from round 1, so that two rounds exercise them (the default warms up
        # for one round, docs/protocols/dsc.md#a20)
        "--set", "hyper.warmup_rounds=0")


@pytest.fixture
def spec4(tmp_path: Path) -> str:
    path = tmp_path / "spec4.yaml"
    path.write_text(SPEC4)
    return str(path)


def link_seconds(payload: int, latency_ms: float, bandwidth_mbps: float, loss: float) -> float:
    """Eq. 5 plus propagation, written out independently of dfl_node."""
    return latency_ms / 1e3 + math.ceil(payload / 1500) / (1 - loss) * (
        8 * 1500 / (bandwidth_mbps * 1e6))


def frame_seconds(slots: list[list[list[int]]], payload: dict[tuple[int, int], int]) -> float:
    return sum(max(link_seconds(payload[a, b], *EDGE[min(a, b), max(a, b)]) for a, b in slot)
               for slot in slots)


def test_dsc_is_exact_across_transports_and_its_time_is_control_plus_j_frames(
    tmp_path: Path, spec4: str
) -> None:
    zmq_sum, inproc_sum = assert_transports_identical(tmp_path, spec4, "dsc", *TINY,
                                                      "--set", "link.compute_ms=0")
    assert zmq_sum["slot_mismatches"] == 0 and zmq_sum["schedule"] == "tdma"
    run = tmp_path / "zmq"
    slots = json.loads((run / "schedule.json").read_text())["slots"]
    ledger = json.loads((run / "ledger.json").read_text())
    policy = {int(n): 4 * K * len(t) for n, t in zmq_sum["portfolios"].items()}  # 4 K |T_n|
    assert policy == {0: 96, 1: 64, 2: 64, 3: 32}
    params = {}
    for slot in slots:
        for a, b in slot:
            per_round = ledger[str(a)]["per_link"][f"{a}->{b}"]["payload_bytes"] / ROUNDS
            params[a, b] = (per_round - policy[a]) / DEPTH
    assert set(params.values()) == {4 * (SHARED + 1)}  # psi + the 4-byte weight, every link
    control = frame_seconds(slots, {link: policy[link[0]] for link in params})
    frame = frame_seconds(slots, {link: int(v) for link, v in params.items()})
    expected = ROUNDS * (control + DEPTH * frame)
    assert zmq_sum["virtual_seconds"] == pytest.approx(expected, rel=1e-12)
    assert inproc_sum["virtual_seconds"] == zmq_sum["virtual_seconds"]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert {m["virtual_seconds"] for m in metrics} == {zmq_sum["virtual_seconds"]}

    # The policies differ between nodes and tasks (else dsc would be FedAvg) and are recorded.
    assert zmq_sum["distinct_policies"] > 1
    recorded = {(m["node"], t): tuple(u) for m in metrics for t, u in m["policies"].items()}
    assert len(set(recorded.values())) == zmq_sum["distinct_policies"]
    assert {(int(n), t): tuple(u) for n, p in zmq_sum["policies"].items()
            for t, u in p.items()} == recorded
    # Eq. 18 columns: column sums 1 (up to the float32 weights on the wire), rho < 1.
    assert zmq_sum["column_sums"] == pytest.approx([1.0] * 4, abs=1e-6)
    assert 0 < zmq_sum["rho"] < 1
    assert zmq_sum["formula"]["per_round"]["0"] == {
        "params": 32 * SHARED * DEPTH * 8, "weight": 32 * DEPTH * 8,
        "policy": 8 * sum(policy[a] for a, _ in params)}


BASELINES = {  # protocol -> formula components per round (8 directed links)
    "dsc-noagg": {},
    "dsc-fedavg": {"params": 32 * SHARED * DEPTH * 8},
    "dsc-max": {"params": 32 * SHARED * DEPTH * 8, "weight": 32 * DEPTH * 8,
                "policy": 8 * (96 + 96 + 64 + 64 + 64 + 64 + 64 + 32)},  # 8 links, 4 K |T_a| B
    "dsc-fedamp": {"params": 32 * SHARED * DEPTH * 8},
}


@pytest.mark.slow
@pytest.mark.parametrize("protocol", sorted(BASELINES))
def test_baselines_are_exact_across_transports_and_send_what_the_spec_says(
    tmp_path: Path, spec4: str, protocol: str
) -> None:
    zmq_sum, _ = assert_transports_identical(tmp_path, spec4, protocol, *TINY)
    assert zmq_sum["formula"]["per_round"].get("0", {}) == BASELINES[protocol]
    if protocol == "dsc-noagg":
        assert zmq_sum["payload_bytes"] == 0 and zmq_sum["delta_all"] == pytest.approx(0, abs=1e-9)
        assert zmq_sum["rho"] == 1.0  # W = I
    else:
        assert zmq_sum["column_sums" if protocol != "dsc-fedamp" else "row_sums"] == \
            pytest.approx([1.0] * 4, abs=1e-6)


@pytest.mark.slow
def test_delta_all_against_a_no_aggregation_run(tmp_path: Path, spec4: str) -> None:
    noagg = launch_ok(tmp_path / "noagg", spec4, "dsc-noagg", "--transport", "inproc", *TINY)
    fedavg = launch_ok(tmp_path / "fedavg", spec4, "dsc-fedavg", "--transport", "inproc", *TINY,
                       "--set", f"hyper.delta_baseline={tmp_path / 'noagg'}")
    rep = delta_report(ints(fedavg["task_metrics"]), ints(noagg["task_metrics"]))
    assert fedavg["delta_all"] == pytest.approx(rep.delta_all, abs=1e-12)
    assert fedavg["delta_tasks"] == pytest.approx(rep.per_task)
    assert fedavg["delta_all"] != 0


def ints(table: dict[str, Any]) -> dict[int, Any]:
    return {int(k): v for k, v in table.items()}


@pytest.mark.parametrize(("sets", "needle"), [
    (["hyper.mixing=bogus"], "hyper.mixing: input should be 'column_softmax'"),
    (["hyper.tau=0"], "hyper.tau: must be > 0"),
    (["hyper.fedavg=metropolis"], "hyper.fedavg: unknown key"),  # dsc-fedavg's, not dsc's
    (["scenes={bogus: 1}"], "scenes.bogus: unknown key"),
    (["scenes={portfolios: bogus}"], "scenes.portfolios: input should be 'nyu' or 'taskonomy'"),
    (["scenes={train_size: 50}"], "10 nodes x 30 samples exceed the pool of 50"),
    (["model={name: routed, channel: {kind: awgm}}"],
     "model.channel.kind: unknown 'awgm' (did you mean awgn?)"),
    (["hyper.delta_baseline=/nonexistent"], "hyper.delta_baseline: must be a run directory"),
])
def test_bad_dsc_input_is_one_line_and_exit_2(tmp_path: Path, entry: Callable[..., Exited],
                                              sets: list[str], needle: str) -> None:
    args = [arg for item in sets for arg in ("--set", item)]
    done = entry("dfl-launch", "--topology", "rgg10", "--protocol", "dsc", "--out",
                 str(tmp_path / "r"), *args)
    assert done.code == 2 and done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], done.err


def test_a_bad_tasks_attribute_is_one_line_and_exit_2(tmp_path: Path,
                                                      entry: Callable[..., Exited]) -> None:
    topology = tmp_path / "t.yaml"
    topology.write_text(SPEC4.replace("tasks: [seg]}", "tasks: [seg, colour]}"))
    done = entry("dfl-launch", "--topology", str(topology), "--protocol", "dsc", "--out",
                 str(tmp_path / "r"))
    assert done.code == 2 and done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and "tasks[1]: input should be 'seg'" in lines[0], done.err


@pytest.mark.slow
@pytest.mark.parametrize(("mixing", "components", "sums"), [
    ("push_sum", {"params", "weight", "push_sum", "policy"}, "column_sums"),
    ("row_softmax", {"params", "policy"}, "row_sums"),
])
def test_mixing_ablations_send_what_they_need(tmp_path: Path, spec4: str, mixing: str,
                                              components: set[str], sums: str) -> None:
    summary = launch_ok(tmp_path / "run", spec4, "dsc", "--transport", "inproc", *TINY,
                        "--set", f"hyper.mixing={mixing}")
    assert set(summary["formula"]["per_round"]["0"]) == components
    assert summary[sums] == pytest.approx([1.0] * 4, abs=1e-6)
