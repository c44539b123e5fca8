"""The columns of a family's table, and one cell's statistic over seeds.

Each family's columns are the paper's, declared by the family's lead protocol
(`ProtocolDeclaration.report_table`, read through the registry); this module only evaluates them.

A cell is mean +- the 95% t-interval over the seeds that have a finite value; a threshold some
seeds never reach (inf) is averaged over those that do, and says how many.

A table with a run that has adversaries also gets the honest nodes' columns, whatever its family
(summary.json's `honest`, launcher/results/honest.py). In its runs without adversaries every
client is honest, so those columns hold the all-client figures: the attack-free baseline reads
beside the attacked runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from launcher.results.report_runs import Run
from launcher.results.stats import mean_ci
from protocols.describe import Column, Extract, Summary, number
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


def honest(key: str, everyone: str | None) -> Extract:
    """The honest nodes' `key`; in a run without adversaries, the all-client key `everyone`."""
    def extract(summary: Summary) -> float | None:
        if summary.get("adversaries"):
            return number((summary.get("honest") or {}).get(key))
        return number(summary.get(everyone)) if everyone else None
    return extract


HONEST_COLUMNS = [
    Column("honest_avg_accuracy", "Honest avg acc", "fraction",
           honest("avg_accuracy", "avg_accuracy")),
    Column("honest_worst_accuracy", "Honest worst acc", "fraction",
           honest("worst_accuracy", "worst_accuracy")),
    # the last per-cycle gap is the final models' where parameters were reported
    Column("honest_consensus_distance", "Honest consensus dist", "norm",
           honest("consensus_distance", "consensus_gap")),
    Column("backdoor_asr", "Backdoor ASR", "fraction", honest("backdoor_asr", None)),
]


def columns_for(family: str, runs: list[Run]) -> list[Column]:
    """The family's columns, and the honest nodes' where a run has adversaries."""
    own = report_families()[family].table.columns([run.summary for run in runs])
    attacked = any(run.summary.get("adversaries") for run in runs)
    return [*own, *HONEST_COLUMNS] if attacked else own


def stat(column: Column, runs: list[Run]) -> Stat:
    values = {run.seed: column.extract(run.summary) for run in runs}
    present = [v for v in values.values() if v is not None]
    finite = [v for v in present if math.isfinite(v)]
    mean, half = mean_ci(finite)
    return Stat(mean, half, len(finite), len(present), values)
