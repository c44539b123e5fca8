"""Per-cycle metrics: parameters reach the collector as control traffic without touching the
training ledgers, and every figure in cycles.jsonl / summary.json is recomputed here from the
run's own files (final models, metrics.jsonl, plan.json)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from dfl_node.learning.models import build_model
from dfl_node.learning.shards import load_node_data
from dfl_node.learning.training import evaluate
from dfl_node.settings.data_section import DataSection
from launcher.results.cycle_metrics import cycles_to_threshold
from tests.harness import launch_ok
from topologies.measures import exact_conductance, slem
from topologies.mixing import cluster_matrix, metropolis

ARGS = ("--dataset", "synthetic", "--partition", "shards:2", "--set", "model={name: linear}",
        "--set", "local_steps=1", "--transport", "inproc", "--rounds", "3",
        "--set", "tau_a=1")


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_parameters_are_control_traffic_and_figures_recompute(tmp_path: Path) -> None:
    on = launch_ok(tmp_path / "on", "complete10", "cstc", *ARGS,
                   "--set", "cycle_metrics={params_every: 1, thresholds: [0.0, 0.11, 1.0]}")
    off = launch_ok(tmp_path / "off", "complete10", "cstc", *ARGS,
                    "--set", "cycle_metrics={params_every: 0, thresholds: [0.0]}")
    # the training ledgers cannot see the parameter reports
    assert on["ledger"] == off["ledger"] and on["wire_bytes"] == off["wire_bytes"]
    assert on["control_bytes"] == off["control_bytes"]
    assert json.loads((tmp_path / "on" / "ledger.json").read_text()) == \
        json.loads((tmp_path / "off" / "ledger.json").read_text())
    model_bytes = (32 * 10 + 10) * 4
    assert off["cycle_params_bytes"] == 0
    assert 30 * model_bytes < on["cycle_params_bytes"] < 30 * (model_bytes + 200)  # 10 x 3
    rows = jsonl(tmp_path / "on" / "cycles.jsonl")
    assert [r["round"] for r in rows] == [1, 2, 3]
    assert "consensus_gap" not in jsonl(tmp_path / "off" / "cycles.jsonl")[0]

    run = tmp_path / "on"
    plan = json.loads((run / "plan.json").read_text())
    metrics = [m for m in jsonl(run / "metrics.jsonl") if m["round"] == 3]
    last = rows[-1]
    accs = {m["node"]: m["accuracy"] for m in metrics}
    assert last["accuracy_mean"] == pytest.approx(np.mean(list(accs.values())), abs=1e-12)
    assert (last["accuracy_min"], last["accuracy_max"]) == (min(accs.values()),
                                                            max(accs.values()))
    clusters: dict[int, list[int]] = {}
    for m in sorted(metrics, key=lambda m: m["node"]):
        clusters.setdefault(m["cluster"], []).append(m["node"])
    assert len(clusters) >= 2
    for c, members in clusters.items():
        assert last["clusters"][str(c)]["members"] == members
        assert last["clusters"][str(c)]["accuracy_mean"] == pytest.approx(
            np.mean([accs[i] for i in members]), abs=1e-12)

    # gaps and the network-average model from the final models (= the last cycle's)
    finals = {i: load_file(str(run / "final" / f"node-{i}.safetensors")) for i in range(10)}
    names = sorted(finals[0])

    def gap(members: list[int]) -> float:
        return math.sqrt(sum(float(((np.stack([finals[i][n] for i in members]).astype(
            np.float64) - np.mean([finals[i][n] for i in members], axis=0,
                                  dtype=np.float64)) ** 2).sum()) for n in names))

    assert last["consensus_gap"] == pytest.approx(gap(list(range(10))), rel=1e-9)
    assert on["consensus_gap"] == last["consensus_gap"] > 0
    for c, members in clusters.items():
        assert last["cluster_gaps"][str(c)] == pytest.approx(gap(members), rel=1e-9, abs=1e-12)
    data = load_node_data(DataSection.model_validate(plan["data"]), list(range(10)), 0)
    model = build_model(plan["model"], data.input_shape, data.classes, plan["seed"])
    model.load_state_dict({n: torch.from_numpy(np.mean([finals[i][n] for i in range(10)],
                                                       axis=0, dtype=np.float64)
                                               .astype(np.float32)) for n in names})
    acc, loss = evaluate(model, data.x_eval, data.y_eval, torch.device("cpu"))
    assert (last["avg_model_accuracy"], last["avg_model_loss"]) == (acc, pytest.approx(loss))

    first = next(r["round"] for r in rows if r["accuracy_mean"] >= 0.11) if any(
        r["accuracy_mean"] >= 0.11 for r in rows) else None
    assert on["cycles_to_threshold"] == {"0": 1, "0.11": first, "1": None}

    # the spectral report: K10's Metropolis matrix and each random cluster's
    adj = np.ones((10, 10)) - np.eye(10)
    w = metropolis(adj)
    report = on["spectral"]
    assert report["global"]["lambda_2"] == pytest.approx(np.linalg.eigvalsh(w)[-2], abs=1e-12)
    assert report["global"]["slem"] == pytest.approx(slem(w), abs=1e-12)
    assert report["global"]["conductance"] == pytest.approx(exact_conductance(w))
    blocks = cluster_matrix(adj, list(clusters.values()))
    for c, members in clusters.items():
        sub = blocks[np.ix_(members, members)]
        entry = report["clusters"][str(c)]
        assert entry["size"] == len(members)
        assert entry["edges"] == len(members) * (len(members) - 1) // 2
        assert entry["lambda_2"] == pytest.approx(np.linalg.eigvalsh(sub)[-2], abs=1e-12)


def test_cycles_to_threshold_is_the_first_round_reaching_it() -> None:
    rows = [{"round": 2, "accuracy_mean": 0.5}, {"round": 1, "accuracy_mean": 0.3},
            {"round": 3, "accuracy_mean": 0.45}]
    assert cycles_to_threshold(rows, [0.3, 0.4, 0.5, 0.6]) == {"0.3": 1, "0.4": 2, "0.5": 2,
                                                               "0.6": None}
