"""The columns of a family's table, and one cell's statistic over seeds.

Each family's columns are the paper's, declared by the family's lead protocol
(`ProtocolDeclaration.report_table`, read through the registry); this module only evaluates them.

A cell is mean +- the 95% t-interval over the seeds that have a finite value; a threshold some
seeds never reach (inf) is averaged over those that do, and says how many.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from launcher.results.report_runs import Run
from launcher.results.stats import mean_ci
from protocols.describe import Column
from protocols.registry import report_families

__all__ = ["Column", "Stat", "columns_for", "stat"]


@dataclass(frozen=True)
class Stat:
    """One cell: mean and 95% half-width over the `n` seeds with a finite value, of the
    `total` seeds with any (inf: a threshold not reached)."""

    mean: float
    half: float
    n: int
    total: int
    values: dict[int, float | None]  # per seed


def columns_for(family: str, runs: list[Run]) -> list[Column]:
    return report_families()[family].table.columns([run.summary for run in runs])


def stat(column: Column, runs: list[Run]) -> Stat:
    values = {run.seed: column.extract(run.summary) for run in runs}
    present = [v for v in values.values() if v is not None]
    finite = [v for v in present if math.isfinite(v)]
    mean, half = mean_ci(finite)
    return Stat(mean, half, len(finite), len(present), values)
