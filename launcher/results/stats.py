"""Aggregating a metric over seeds the way the papers report it: mean +- a 95% interval.

Each metric is computed per seed first (one run directory each), then aggregated. The interval
is Student-t with df = R - 1 (DMFL-SQ spec 8.1, A19): half-width t_{0.975,R-1} sd / sqrt(R),
sd with ddof 1. With one seed there is no interval (nan).

The t quantile is exact (not a rounded table, no scipy at run time): for integer df the
two-sided mass P(|T| <= t) has a closed form (Abramowitz & Stegun 26.7.3-4), inverted by
bisection to float precision.
"""

from __future__ import annotations

import math
import statistics


def two_sided_mass(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with `df` degrees of freedom (integer, >= 1)."""
    theta = math.atan(t / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    if df % 2:
        term, total = 1.0, 0.0
        for k in range(1, (df - 1) // 2 + 1):
            total += term
            term *= cos2 * 2 * k / (2 * k + 1)
        return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    term, total = 1.0, 0.0
    for k in range(1, df // 2 + 1):
        total += term
        term *= cos2 * (2 * k - 1) / (2 * k)
    return math.sin(theta) * total


def t_quantile(level: float, df: int) -> float:
    """The t with P(|T| <= t) = level: the half-width factor of a two-sided `level` interval."""
    low, high = 0.0, 1.0
    while two_sided_mass(high, df) < level:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if mid in (low, high):
            break
        low, high = (mid, high) if two_sided_mass(mid, df) < level else (low, mid)
    return high


def t975(df: int) -> float:
    """t_{0.975, df}: the factor of a two-sided 95% interval."""
    return t_quantile(0.95, df)


def mean_ci(values: list[float]) -> tuple[float, float]:
    """(mean, 95% half-width) over seeds."""
    if not values:
        return math.nan, math.nan
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan
    return mean, t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
