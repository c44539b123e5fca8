"""D-PSGD under `--set schedule=tdma`: real processes, slot checks, radio time, exactness."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness import Exited, assert_transports_identical, final_files, launch_ok

# The graph of docs/protocols/dsc.md#worked-example, with a lossy and a slow edge.
SPEC4 = """\
name: spec4
nodes:
  - {id: 0, position: [0.0, 0.0]}
  - {id: 1, position: [1.0, 0.0]}
  - {id: 2, position: [1.0, 1.0]}
  - {id: 3, position: [2.0, 1.0]}
edges:
  - [0, 1]
  - {u: 1, v: 2, latency_ms: 3.0}
  - {u: 2, v: 3, loss: 0.5}
  - {u: 0, v: 2, loss: 0.1, bandwidth_mbps: 20.0}
"""
ROUNDS = 3
COMMON = ("--dataset", "synthetic", "--partition", "iid", "--rounds", str(ROUNDS))
TDMA = (*COMMON, "--set", "schedule=tdma", "--set", "tdma.interference_range=1")


@pytest.fixture
def spec4(tmp_path: Path) -> str:
    path = tmp_path / "spec4.yaml"
    path.write_text(SPEC4)
    return str(path)


def link_seconds(payload: int, latency_ms: float, bandwidth_mbps: float, loss: float) -> float:
    """Eq. 5 plus propagation, written out independently of dfl_node."""
    n_packets = math.ceil(payload / 1500)
    return latency_ms / 1e3 + n_packets / (1 - loss) * (8 * 1500 / (bandwidth_mbps * 1e6))


def test_four_processes_keep_their_slots_and_time_is_rounds_times_the_frame(
    tmp_path: Path, spec4: str
) -> None:
    run = tmp_path / "run"
    summary = launch_ok(run, spec4, "d-psgd", "--transport", "zmq", *TDMA,
                        "--set", "link.compute_ms=0")
    assert len({n["pid"] for n in summary["nodes"]}) == 4
    assert summary["schedule"] == "tdma" and summary["slot_mismatches"] == 0
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert sorted(m["node"] for m in metrics if m["round"] == ROUNDS) == [0, 1, 2, 3]
    assert all(m["slot_mismatches"] == 0 for m in metrics)  # at every receiver, every round

    schedule = json.loads((run / "schedule.json").read_text())
    assert schedule["slots"] == [[[0, 2]], [[1, 2]], [[2, 0]], [[2, 1]], [[0, 1], [3, 2]],
                                 [[1, 0], [2, 3]]]
    ledger = json.loads((run / "ledger.json").read_text())
    edge = {(0, 1): (1.0, 100.0, 0.0), (1, 2): (3.0, 100.0, 0.0), (2, 3): (1.0, 100.0, 0.5),
            (0, 2): (1.0, 20.0, 0.1)}
    frame = 0.0
    for slot in schedule["slots"]:
        slowest = 0.0
        for a, b in slot:
            payload = ledger[str(a)]["per_link"][f"{a}->{b}"]["payload_bytes"] / ROUNDS
            slowest = max(slowest, link_seconds(int(payload), *edge[min(a, b), max(a, b)]))
        frame += slowest
    assert summary["virtual_seconds"] == pytest.approx(ROUNDS * frame, rel=1e-12)
    assert {m["virtual_seconds"] for m in metrics if m["round"] == ROUNDS} == {
        summary["virtual_seconds"]}

    links = json.loads((run / "links.json").read_text())["links"]
    assert sorted(links) == sorted(f"{a}->{b}" for slot in schedule["slots"] for a, b in slot)
    lossy = links["2->3"]
    assert lossy["transmissions"] == pytest.approx(2 * lossy["packets"])
    assert lossy["retransmissions"] == pytest.approx(lossy["packets"])
    assert links["0->1"]["retransmissions"] == 0
    assert summary["retransmissions"] == pytest.approx(
        sum(row["retransmissions"] for row in links.values()))


def test_tdma_with_sampled_retransmissions_is_bit_identical_across_transports(
    tmp_path: Path, spec4: str
) -> None:
    zmq_sum, inproc_sum = assert_transports_identical(
        tmp_path, spec4, "d-psgd", *TDMA, "--set", "link.retransmissions=sampled")
    assert zmq_sum["virtual_seconds"] == inproc_sum["virtual_seconds"] > 0
    assert zmq_sum["retransmissions"] == inproc_sum["retransmissions"] > 0
    assert zmq_sum["slot_mismatches"] == inproc_sum["slot_mismatches"] == 0
    links = json.loads((tmp_path / "zmq" / "links.json").read_text())["links"]
    assert links["2->3"]["transmissions"] == int(links["2->3"]["transmissions"])  # draws
    sync = tmp_path / "sync"
    sync_sum = launch_ok(sync, spec4, "d-psgd", "--transport", "inproc", *COMMON,
                         "--set", "link.retransmissions=sampled")
    assert sync_sum["schedule"] == "sync" and sync_sum["retransmissions"] == 0
    assert final_files(sync) == final_files(tmp_path / "inproc")  # slots never change values


def test_rgg10_outage_model_under_tdma(tmp_path: Path) -> None:
    """Loss from distance and SNR on the shipped RGG: longer links retransmit more."""
    summary = launch_ok(tmp_path / "run", "rgg10", "d-psgd", "--transport", "inproc",
                        "--dataset", "synthetic", "--partition", "iid", "--rounds", "2",
                        "--set", "schedule=tdma", "--set", "link.loss_model=outage",
                        "--set", "link.snr0_db=30")
    assert summary["slot_mismatches"] == 0 and summary["retransmissions"] > 0
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    pos = {n["id"]: n["position"] for n in plan["topology"]["nodes"]}
    links = json.loads((tmp_path / "run" / "links.json").read_text())["links"]
    ratio = {k: v["transmissions"] / v["packets"] for k, v in links.items()}
    by_length = sorted(ratio, key=lambda k: math.dist(*(pos[int(x)] for x in k.split("->"))))
    assert ratio[by_length[0]] < ratio[by_length[-1]]
    assert plan["schedule"]["interference_range"] == plan["topology"]["generator"]["grown_radius"]


@pytest.mark.parametrize(("sets", "needle"), [
    (["schedule=bogus"], "schedule: input should be 'sync' or 'tdma', got 'bogus'"),
    (["link.loss=2"], "link.loss: must be < 1, got 2"),
    (["link.loss_model=outage"], "needs node positions"),
    (["schedule=tdma", "tdma.interference_range=-1"], "interference_range"),
])
def test_bad_schedule_or_link_input_is_one_line_and_exit_2(
    tmp_path: Path, entry: Callable[..., Exited], sets: list[str], needle: str
) -> None:
    args = [arg for item in sets for arg in ("--set", item)]
    done = entry("dfl-launch", "--topology", "ring20", "--protocol", "d-psgd", "--out",
                 str(tmp_path / "r"), *args)
    assert done.code == 2 and done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], done.err
