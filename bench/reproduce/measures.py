"""What one finished run measured, under the names the papers' claims use.

Scalars are summary.json's keys (avg_accuracy, worst_accuracy, bottom10_accuracy, std_accuracy,
jain_index, cvar10_loss, bits_per_client, trigger_rate, delta_all, virtual_seconds, ...) plus
these derived ones:
- `train_loss`: the clients' mean training loss at the last evaluation (metrics.jsonl);
- `psi_bits`: DMFL-SQ's fairness-consensus bits per client in the last evaluated round;
- `global_*`: the same accuracy keys on the global test subset, under `eval_split: both`;
- `delta_seg`, `delta_sn`, `delta_dep`, ...: DSC's Delta per task (summary `delta_tasks`);
- `delta_group:seg+dep`: DSC's mean Delta over the clients whose portfolio is exactly those
  tasks (summary `delta_clients`, portfolios from `task_metrics`);
- `honest_avg_accuracy`, `honest_worst_accuracy`, `honest_consensus_distance`,
  `backdoor_asr`: the honest clients' figures (summary `honest`, dfl-report's columns of the
  same names); in a run without adversaries, the all-client ones, so that an attack-free arm
  sits on the same axis as the attacked ones (ClippedGossip's delta_max = 0);
- `packet_loss_probability`: the mean over links of the share of packet transmissions that
  were retransmissions (links.json; the radio channel of docs/protocols/dsc.md);
- `s_argmin_H`: the S at which Algorithm 1's H is smallest over every candidate;
- `s_star`: SSD-FL's chosen number of clusters (prephase.json);
- `cycles_to_0.65`, ...: SSD-FL's first cycle whose mean accuracy reaches the threshold
  (summary `cycles_to_threshold`; absent when it never does);
- `majority:avg_accuracy`, `majority:worst_accuracy`, ... and `majority:global_avg_accuracy`,
  ...: the same accuracy figures for the majority-class predictor, each client answering the
  most frequent class of its own test split (of the global subset, for `global_*`): the bar a
  trained model must clear (a client of a Dirichlet(0.1) split that always answers its main
  class scores 0.6 here); `chance`: one over the number of classes. Classification runs only.
Series are a metric along an axis within one run: along `round`, the per-evaluation means
(accuracy, worst_accuracy, cvar10_loss, train_loss, trigger_rate, bits_per_client cumulative per
client by eq. 20, global_accuracy); along `S`, SSD-FL's `objective_H` of Algorithm 1 for every
candidate number of clusters (clustering.json).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from dfl_node.learning.datacache import DataError
from dfl_node.learning.datasets import load_arrays
from dfl_node.learning.shards import global_split, split_indices
from dfl_node.settings.data_section import DataSection
from launcher.results.report_columns import HONEST_COLUMNS
from launcher.run.fairness import fairness

SUMMARY_KEYS = ("avg_accuracy", "worst_accuracy", "bottom10_accuracy", "std_accuracy",
                "jain_index", "cvar10_loss", "bits_per_client", "trigger_rate", "delta_all",
                "virtual_seconds", "wire_bytes", "avg_model_accuracy", "rho_mean")


@dataclass
class Measured:
    scalars: dict[str, float] = field(default_factory=dict)
    series: dict[str, dict[str, dict[float, float]]] = field(default_factory=dict)
    """axis -> metric -> {x: value}."""
    summary: dict[str, Any] = field(default_factory=dict, repr=False)
    """The run's summary.json, for what an experiment derives across runs (DSC's Delta
    against the same seed's no-aggregation run)."""
    seed: int | None = None
    """The run's seed: arms are compared seed by seed (None: its position among its arm's)."""
    run_dir: Path | None = None


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def measure(run_dir: Path, seed: int | None = None) -> Measured:
    summary = json.loads((run_dir / "summary.json").read_text())
    out = Measured(summary=summary, seed=seed, run_dir=run_dir)
    for key in SUMMARY_KEYS:
        if (value := number(summary.get(key))) is not None:
            out.scalars[key] = value
    for column in HONEST_COLUMNS:
        if (value := column.extract(summary)) is not None:
            out.scalars[column.key] = value
    for key, value in (summary.get("global_eval") or {}).items():
        if (v := number(value)) is not None:
            out.scalars[f"global_{key}"] = v
    for threshold, cycles in (summary.get("cycles_to_threshold") or {}).items():
        if (v := number(cycles)) is not None:
            out.scalars[f"cycles_to_{threshold}"] = v
    for task, value in (summary.get("delta_tasks") or {}).items():
        if (v := number(value)) is not None:
            out.scalars[f"delta_{task}"] = v
    out.scalars |= portfolio_deltas(summary)
    links = run_dir / "links.json"
    rows = json.loads(links.read_text()).get("links", {}).values() if links.is_file() else []
    losses = [r["retransmissions"] / r["transmissions"] for r in rows
              if number(r.get("transmissions")) and number(r.get("retransmissions")) is not None]
    if losses:
        out.scalars["packet_loss_probability"] = sum(losses) / len(losses)
    prephase = run_dir / "prephase.json"
    if prephase.is_file():
        s_star = json.loads(prephase.read_text()).get("s_star")
        if (v := number(s_star)) is not None:
            out.scalars["s_star"] = v
    clustering = run_dir / "clustering.json"
    if clustering.is_file():
        rows = json.loads(clustering.read_text())["candidates"]
        h = {float(r["S"]): float(r["H"]) for r in rows if number(r.get("H")) is not None}
        out.series["S"] = {"objective_H": h}
        if h:
            out.scalars["s_argmin_H"] = min(h, key=lambda x: h[x])
    out.scalars |= majority_bars(run_dir)
    out.series["round"] = round_series(run_dir, summary)
    for key in ("train_loss", "psi_bits"):
        if out.series["round"].get(key):
            last = max(out.series["round"][key])
            out.scalars[key] = out.series["round"][key][last]
    return out


ACCURACY_FIGURES = ("avg_accuracy", "worst_accuracy", "bottom10_accuracy", "std_accuracy",
                    "jain_index")


def majority_bars(run_dir: Path) -> dict[str, float]:
    """The `majority:` figures and `chance` of a classification run ({} for another kind of
    run, whose data section names no class labels)."""
    plan = json.loads((run_dir / "plan.json").read_text())
    clients = [n["id"] for n in plan["nodes"] if n["id"] != plan.get("aggregator")]
    data = DataSection.model_validate(plan["data"])
    split = data.eval_split
    try:
        own, shared, classes = majority_shares(data.model_dump_json(), len(clients),
                                               split != "global")
    except DataError:  # not on disk nor generated: no class labels to count
        return {}
    out = {"chance": 1 / classes}
    if split in ("local", "both"):
        out |= {f"majority:{k}": v for k, v in figures(own).items()}
    if split == "global":
        out |= {f"majority:{k}": v for k, v in figures([shared] * len(clients)).items()}
    if split == "both":
        out |= {f"majority:global_{k}": v for k, v in figures([shared] * len(clients)).items()}
    return out


def figures(accuracies: list[float]) -> dict[str, float]:
    fair = fairness(accuracies, [0.0] * len(accuracies))
    return {"avg_accuracy": sum(accuracies) / len(accuracies),
            "worst_accuracy": min(accuracies),
            **{k: fair[k] for k in ACCURACY_FIGURES if k in fair}}


@lru_cache(maxsize=32)
def majority_shares(data_json: str, parts: int, own: bool) -> tuple[list[float], float, int]:
    """Each client's majority-class share of its own test split (when `own`), the global
    subset's, and the number of classes; the same partition the nodes made (a pure function of
    the labels and the data section), cached per data section: an experiment's arms share it."""
    data = DataSection.model_validate_json(data_json)
    arrays = load_arrays(data)
    local = data.model_copy(update={"eval_split": "local"})
    evals = split_indices(local, arrays.y_train, arrays.y_test, parts)[1] if own else []
    return ([share(arrays.y_test[idx]) for idx in evals],
            share(arrays.y_test[global_split(data, arrays.y_test)]), arrays.classes)


def share(labels: np.ndarray) -> float:
    return float(np.bincount(labels).max() / len(labels)) if len(labels) else 0.0


def portfolio_deltas(summary: dict[str, Any]) -> dict[str, float]:
    clients = summary.get("delta_clients") or {}
    tasks = summary.get("task_metrics") or {}
    groups: dict[str, list[float]] = defaultdict(list)
    for node, delta in clients.items():
        if node in tasks and (v := client_delta(delta)) is not None:
            groups["+".join(portfolio_order(tasks[node]))].append(v)
    return {f"delta_group:{g}": sum(v) / len(v) for g, v in groups.items()}


def client_delta(per_task: Any) -> float | None:
    """Delta_i of one client: the mean of its Delta_{i,t} over its tasks (the summary keeps
    one value per task, protocols/dsc/delta.py)."""
    if isinstance(per_task, dict):
        values = [number(v) for v in per_task.values()]
        return sum(v for v in values if v is not None) / len(values) \
            if values and None not in values else None
    return number(per_task)


TASK_ORDER = ("seg", "sn", "dep")


def portfolio_order(tasks: Any) -> list[str]:
    """A portfolio's tasks in the paper's order (seg, sn, dep, then any other by name)."""
    names = list(tasks)
    return sorted(names, key=lambda t: (TASK_ORDER.index(t) if t in TASK_ORDER else 99, t))


def round_series(run_dir: Path, summary: dict[str, Any]) -> dict[str, dict[float, float]]:
    rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    metrics = run_dir / "metrics.jsonl"
    for line in metrics.read_text().splitlines() if metrics.is_file() else ():
        row = json.loads(line)
        if isinstance(row.get("round"), int) and number(row.get("accuracy")) is not None:
            rows[row["round"]].append(row)
    clients = max(len(summary.get("nodes") or []), 1)
    per_round = (summary.get("formula") or {}).get("per_round") or {}
    bits, cumulative = {0: 0.0}, 0.0  # round 0: the untrained models (eval_at_start)
    for t in range(max(rows, default=0)):
        cumulative += sum((per_round.get(str(t)) or {}).values())
        bits[t + 1] = cumulative / clients
    series: dict[str, dict[float, float]] = defaultdict(dict)
    for r, group in sorted(rows.items()):
        accs = [float(g["accuracy"]) for g in group]
        losses = [float(g["loss"]) for g in group if number(g.get("loss")) is not None]
        series["accuracy"][r] = sum(accs) / len(accs)
        series["worst_accuracy"][r] = min(accs)
        if len(losses) == len(accs):
            series["cvar10_loss"][r] = fairness(accs, losses)["cvar10_loss"]
        for key, name in (("train_loss", "train_loss"), ("triggered", "trigger_rate"),
                          ("global_accuracy", "global_accuracy"), ("psi_bits", "psi_bits")):
            values = [v for g in group if (v := number(g.get(key))) is not None]
            if values:
                series[name][r] = sum(values) / len(values)
        if per_round:
            series["bits_per_client"][r] = bits.get(r, cumulative / clients)
    return dict(series)
