"""Aggregating a metric over seeds the way the papers report it: mean +- a 95% interval.

The statistics live in `launcher.results.stats` (dfl-report uses them too); the reproduction scripts
import them from here, with the overlap test only they need.
"""

from __future__ import annotations

from launcher.results.stats import mean_ci, t975

__all__ = ["mean_ci", "separated", "t975"]


def separated(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when the two intervals do not overlap."""
    return abs(a[0] - b[0]) > a[1] + b[1]
