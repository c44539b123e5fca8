"""Aggregating a metric over seeds the way the papers report it: mean +- a 95% interval.

Each metric is computed per seed first (one run directory each), then aggregated. The interval
is Student-t with df = R - 1 (docs/reporting.md#dfl-report-tables-and-plots-over-seeds):
half-width t_{0.975,R-1} sd / sqrt(R), sd with ddof 1. With one seed there is no interval (nan).
"""

from __future__ import annotations

import math
import statistics

from scipy import stats


def t975(df: int) -> float:
    """t_{0.975, df}: the factor of a two-sided 95% interval."""
    return float(stats.t.ppf(0.975, df))


def mean_ci(values: list[float]) -> tuple[float, float]:
    """(mean, 95% half-width) over seeds."""
    if not values:
        return math.nan, math.nan
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan
    return mean, t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
