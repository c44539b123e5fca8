"""The columns of each family's table, the paper's, and one cell's statistic over seeds.

- dmfl-sq family (DMFL-SQ Table II): average, worst and bottom-10% client accuracy, the
  accuracies' std, Jain's index, formula bits per client.
- ssd-fl family (SSD-FL Sec. VI, Tables I-II): final mean accuracy and the cycles to each
  accuracy threshold the runs were configured with (`cycle_metrics.thresholds`).
- dsc family (DSC Table 2): Delta per task and Delta_all, in % against no aggregation (runs
  without a `delta_baseline` have none).

A cell is mean +- the 95% t-interval over the seeds that have a finite value; a threshold some
seeds never reach (inf) is averaged over those that do, and says how many.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from launcher.results.report_runs import Run
from launcher.results.stats import mean_ci

Extract = Callable[[dict[str, Any]], float | None]


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    unit: str  # how a value reads: "fraction", "bits", "cycles", "percent"
    extract: Extract


@dataclass(frozen=True)
class Stat:
    """One cell: mean and 95% half-width over the `n` seeds with a finite value, of the
    `total` seeds with any (inf: a threshold not reached)."""

    mean: float
    half: float
    n: int
    total: int
    values: dict[int, float | None]  # per seed


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def key(name: str) -> Extract:
    return lambda summary: number(summary.get(name))


def nested(outer: str, inner: str) -> Extract:
    return lambda summary: number((summary.get(outer) or {}).get(inner))


def cycles(threshold: str) -> Extract:
    """None where the run had no such threshold, inf where it never reached it."""
    def extract(summary: dict[str, Any]) -> float | None:
        reached = summary.get("cycles_to_threshold") or {}
        if threshold not in reached:
            return None
        value = number(reached[threshold])
        return math.inf if value is None else value
    return extract


DMFLSQ = [
    Column("avg_accuracy", "Avg acc", "fraction", key("avg_accuracy")),
    Column("worst_accuracy", "Worst acc", "fraction", key("worst_accuracy")),
    Column("bottom10_accuracy", "Bottom-10% acc", "fraction", key("bottom10_accuracy")),
    Column("std_accuracy", "Acc std", "fraction", key("std_accuracy")),
    Column("jain_index", "Jain index", "fraction", key("jain_index")),
    Column("bits_per_client", "Bits/client", "bits", key("bits_per_client")),
]


def union(runs: list[Run], outer: str) -> list[str]:
    return sorted({name for run in runs for name in (run.summary.get(outer) or {})})


def ssdfl_columns(runs: list[Run]) -> list[Column]:
    thresholds = sorted(union(runs, "cycles_to_threshold"), key=float)
    return [Column("avg_accuracy", "Final acc", "fraction", key("avg_accuracy")),
            *(Column(f"cycles_to_{t}", f"Cycles to {t}", "cycles",
                     cycles(t)) for t in thresholds)]


def dsc_columns(runs: list[Run]) -> list[Column]:
    return [*(Column(f"delta_{task}", f"Δ {task} (%)", "percent", nested("delta_tasks", task))
              for task in union(runs, "delta_tasks")),
            Column("delta_all", "Δ_all (%)", "percent", key("delta_all"))]


def columns_for(family: str, runs: list[Run]) -> list[Column]:
    if family == "dmfl-sq":
        return DMFLSQ
    return ssdfl_columns(runs) if family == "ssd-fl" else dsc_columns(runs)


def stat(column: Column, runs: list[Run]) -> Stat:
    values = {run.seed: column.extract(run.summary) for run in runs}
    present = [v for v in values.values() if v is not None]
    finite = [v for v in present if math.isfinite(v)]
    mean, half = mean_ci(finite)
    return Stat(mean, half, len(finite), len(present), values)
