"""Honest metrics: a run with adversaries reports its honest nodes alone (summary.json's
`honest`, per-cycle `honest_consensus_distance`, a backdoor's success rate, dfl-report's honest
columns), every figure recomputed here from the run's own files; a run without adversaries
gets none of the new keys."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

import dfl_mesh
from dfl_node.learning.arrays import DatasetArrays, normalised
from dfl_node.learning.models import build_model
from dfl_node.learning.shards import NodeData
from protocols.backdoor_probe import Trigger, triggered
from protocols.robust.poisoning import attack_success_rate, stamp_trigger
from tests.harness import ENV_ROOT, ROOT, launch_ok
from tests.rings import ring_file

SYNTHETIC = ("--dataset", "synthetic", "--partition", "iid", "--transport", "inproc",
             "--rounds", "3")
SIGN_FLIP = "adversaries={nodes: [2], behaviour: [{kind: sign-flip}]}"


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def finals(run: Path, ids: list[int]) -> dict[int, dict[str, np.ndarray]]:
    return {i: load_file(str(run / "final" / f"node-{i}.safetensors")) for i in ids}


def distance(models: dict[int, dict[str, np.ndarray]]) -> float:
    """sqrt(sum_i ||x_i - x_bar||^2) over whole flattened models, in float64."""
    flat = np.stack([np.concatenate([m[n].astype(np.float64).ravel() for n in sorted(m)])
                     for m in models.values()])
    return math.sqrt(float(((flat - flat.mean(axis=0)) ** 2).sum()))


def test_a_run_with_adversaries_reports_its_honest_nodes_alone(tmp_path: Path) -> None:
    ring = ring_file(tmp_path, 6)
    run = tmp_path / "attacked"
    summary = launch_ok(run, ring, "d-psgd", *SYNTHETIC, "--set", SIGN_FLIP,
                        "--set", "cycle_metrics={params_every: 1}")
    assert summary["adversaries"] == {"2": [{"kind": "sign-flip"}]}
    honest = summary["honest"]
    ids = [0, 1, 3, 4, 5]
    assert honest["nodes"] == ids
    rows = {n["id"]: n for n in summary["nodes"]}
    accs = np.array([rows[i]["accuracy"] for i in ids])
    losses = np.array([rows[i]["loss"] for i in ids])
    assert honest["avg_accuracy"] == pytest.approx(accs.mean(), abs=1e-12)
    assert honest["worst_accuracy"] == accs.min()
    assert honest["bottom10_accuracy"] == accs.min()  # ceil(0.1 * 5) = 1 node
    assert honest["std_accuracy"] == pytest.approx(accs.std(), abs=1e-12)
    assert honest["jain_index"] == pytest.approx(accs.sum() ** 2 / (5 * (accs**2).sum()))
    assert honest["cvar10_loss"] == losses.max()
    # the all-client keys stay what they were: over every client, the adversary among them
    every = np.array([n["accuracy"] for n in summary["nodes"]])
    assert summary["avg_accuracy"] == pytest.approx(every.mean(), abs=1e-12)
    # the consensus distance of the honest final models, and per cycle from params records
    models = finals(run, list(range(6)))
    assert honest["consensus_distance"] == pytest.approx(
        distance({i: models[i] for i in ids}), rel=1e-9)
    cycles = jsonl(run / "cycles.jsonl")
    assert [c["round"] for c in cycles] == [1, 2, 3]
    assert all(c["honest_consensus_distance"] > 0 for c in cycles)
    assert cycles[-1]["honest_consensus_distance"] == pytest.approx(
        honest["consensus_distance"], rel=1e-12)
    assert summary["consensus_gap"] == pytest.approx(distance(models), rel=1e-9)
    # no backdoor: nothing measured
    assert "backdoor_asr" not in honest
    # the Python API's typed summary holds the same figures
    typed = dfl_mesh.load(run).summary
    assert typed.adversaries == (2,) and typed.honest is not None
    assert typed.honest.nodes == tuple(ids)
    for key in ("avg_accuracy", "worst_accuracy", "bottom10_accuracy", "std_accuracy",
                "jain_index", "cvar10_loss", "consensus_distance"):
        assert getattr(typed.honest, key) == honest[key], key
    assert typed.honest.backdoor_asr is None and typed.honest.worst_backdoor_asr is None
    assert not any("backdoor_asr" in row for row in jsonl(run / "metrics.jsonl"))

    # without adversaries: no new key anywhere, and dfl-report reads its all-client figures
    # as the honest ones beside the attacked run
    clean = tmp_path / "clean"
    plain = launch_ok(clean, ring, "d-psgd", *SYNTHETIC,
                      "--set", "cycle_metrics={params_every: 1}")
    assert "adversaries" not in plain and "honest" not in plain
    assert dfl_mesh.load(clean).summary.adversaries == ()
    assert dfl_mesh.load(clean).summary.honest is None
    # the sign flip reached the honest nodes, and the all-client figures hide how far
    assert honest["avg_accuracy"] != plain["avg_accuracy"]
    assert honest["avg_accuracy"] != summary["avg_accuracy"]
    assert "honest_consensus_distance" not in jsonl(clean / "cycles.jsonl")[-1]
    proc = subprocess.run([sys.executable, "-m", "launcher.report_cli", str(run), str(clean),
                           "--format", "json"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=ENV_ROOT)
    assert proc.returncode == 0, proc.stderr
    (table,) = json.loads(proc.stdout)["tables"]
    keys = [c["key"] for c in table["columns"]]
    assert keys[-4:] == ["honest_avg_accuracy", "honest_worst_accuracy",
                         "honest_consensus_distance", "backdoor_asr"]
    cells = {Path(g["runs"][0]).name: g["cells"] for g in table["groups"]}
    attacked = cells["attacked"]
    assert attacked["honest_avg_accuracy"]["mean"] == honest["avg_accuracy"]
    assert attacked["honest_worst_accuracy"]["mean"] == honest["worst_accuracy"]
    assert attacked["honest_consensus_distance"]["mean"] == honest["consensus_distance"]
    assert attacked["backdoor_asr"]["n"] == 0
    assert cells["clean"]["honest_avg_accuracy"]["mean"] == plain["avg_accuracy"]
    assert cells["clean"]["honest_consensus_distance"]["mean"] == plain["consensus_gap"]


def images(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """4 classes of 6x6 one-channel images, class c a brighter row c under noise: the
    trigger's square (rows 3-5) looks a little like class 3, so its success rate is no 0."""
    y = rng.integers(0, 4, n)
    x = rng.random((n, 1, 6, 6), dtype=np.float32) * 0.6
    for c in range(4):
        x[y == c, 0, c, :] += 0.4
    return x, y


def test_every_honest_node_measures_the_backdoor(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x_test, y_test = images(rng, 300)
    target, size = 3, 3
    result = dfl_mesh.run(
        ring_file(tmp_path, 6), "d-psgd", out=tmp_path / "run", progress=False, plots=False,
        dataset={"train": images(rng, 600), "test": (x_test, y_test)}, rounds=3,
        transport="inproc", partition="iid", model={"name": "linear"},
        adversaries={"nodes": [2], "behaviour": [{"kind": "backdoor", "target": target}]})
    assert result.ok
    rows = jsonl(tmp_path / "run" / "metrics.jsonl")
    assert {r["node"] for r in rows if "backdoor_asr" in r} == {0, 1, 3, 4, 5}
    assert not any("backdoor_asr" in r for r in rows if r["node"] == 2)
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    model = build_model(plan["model"], (1, 6, 6), 4, plan["seed"])
    stamped = stamp_trigger(torch.from_numpy(x_test), size)
    last = {r["node"]: r for r in rows if r["round"] == 3}
    rates = []
    for node, weights in finals(tmp_path / "run", [0, 1, 3, 4, 5]).items():
        model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
        with torch.no_grad():
            predicted = model(stamped).argmax(dim=1)
        rate = attack_success_rate(predicted, torch.from_numpy(y_test), target)
        assert last[node]["backdoor_asr"] == pytest.approx(rate, abs=1e-12)
        rates.append(rate)
    assert max(rates) > 0
    honest = result.raw["honest"]
    assert honest["backdoor_asr"] == pytest.approx(np.mean(rates), abs=1e-12)
    assert honest["worst_backdoor_asr"] == max(rates)
    typed = result.summary.honest
    assert typed is not None and typed.backdoor_asr == honest["backdoor_asr"]
    assert typed.worst_backdoor_asr == honest["worst_backdoor_asr"]


def test_the_trigger_tested_is_the_one_trained_on_raw_pixels() -> None:
    """On uint8 images the adversary stamps 255 on raw pixels and normalises them as it reads
    them; the honest node's eval split is normalised already: its triggered split must equal the
    raw test images stamped, then normalised (bit for bit), channel by channel."""
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 200, (40, 3, 8, 8), dtype=np.uint8)
    labels = rng.integers(0, 4, 40)
    mean, std = np.array([0.2, 0.4, 0.6], np.float32), np.array([0.3, 0.2, 0.1], np.float32)
    arrays = DatasetArrays(pixels, labels, pixels, labels, 4, mean, std)
    idx = np.arange(40)
    data = NodeData(*arrays.train(idx), *arrays.test(idx), 4)
    x, y = triggered(data, Trigger(target=1, size=2)) or (None, None)
    others = labels != 1
    raw = stamp_trigger(torch.from_numpy(pixels[others]), 2).numpy()
    assert np.array_equal(x, normalised(raw, mean, std, 4))
    assert y.tolist() == [1] * int(others.sum())
