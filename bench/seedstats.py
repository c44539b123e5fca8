"""Aggregating a metric over seeds the way the papers report it: mean +- a 95% interval.

Each metric is computed per seed first (one run directory each), then aggregated. The interval
is Student-t with df = R - 1 (DMFL-SQ spec 8.1, A19): half-width t_{0.975,R-1} sd / sqrt(R),
sd with ddof 1. With one seed there is no interval (reported as nan).
"""

from __future__ import annotations

import math
import statistics

# t_{0.975, df} for df = 1..30 (two-sided 95%); above 30 the normal 1.96 is within 4%.
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    return T975[df - 1] if df <= len(T975) else 1.96


def mean_ci(values: list[float]) -> tuple[float, float]:
    """(mean, 95% half-width) over seeds."""
    if not values:
        return math.nan, math.nan
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan
    return mean, t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def separated(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when the two intervals do not overlap."""
    return abs(a[0] - b[0]) > a[1] + b[1]
