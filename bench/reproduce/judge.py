"""A paper's claim against our measurement: holds, does not hold, or not resolved at this budget.

Judged on means over seeds with 95% t-intervals (bench.seedstats): a comparison holds when the
intervals are apart in the claimed direction and fails when they are apart the other way; when
they overlap (or one seed gives no interval) the budget did not resolve it. A trend compares the
ends of the swept range the same way; a U-shape needs an interior value apart below both ends, a
peak one apart above both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from itertools import pairwise

from bench.reproduce.paperdata import Check
from bench.seedstats import mean_ci


class Verdict(StrEnum):
    HOLDS = "holds"
    FAILS = "does not hold"
    UNRESOLVED = "not resolved at this budget"


Interval = tuple[float, float]


def _above(a: Interval, b: Interval) -> bool:
    """a's interval lies wholly above b's (never with a missing interval)."""
    if math.isnan(a[1]) or math.isnan(b[1]):
        return False
    return a[0] - a[1] > b[0] + b[1]


def compare(mine: Sequence[float], others: Mapping[str, Sequence[float]],
            higher: bool) -> Verdict:
    """`mine` higher (or lower) than every one of `others`, per seed values each."""
    a = mean_ci(list(mine))
    verdicts = []
    for values in others.values():
        b = mean_ci(list(values))
        better, worse = (a, b) if higher else (b, a)
        if _above(better, worse):
            verdicts.append(Verdict.HOLDS)
        elif _above(worse, better):
            verdicts.append(Verdict.FAILS)
        else:
            verdicts.append(Verdict.UNRESOLVED)
    if Verdict.FAILS in verdicts:
        return Verdict.FAILS
    return Verdict.HOLDS if verdicts and all(v == Verdict.HOLDS for v in verdicts) \
        else Verdict.UNRESOLVED


def trend(points: Mapping[float, Sequence[float]], direction: str) -> Verdict:
    """Per seed values at each swept value: do they rise, fall, or dip in the middle?"""
    xs = sorted(points)
    if len(xs) < 2 or (direction == "u-shaped" and len(xs) < 3):
        return Verdict.UNRESOLVED
    cis = {x: mean_ci(list(points[x])) for x in xs}
    first, last = cis[xs[0]], cis[xs[-1]]
    if direction in ("rises", "falls"):
        up, down = _above(last, first), _above(first, last)
        if not (up or down):
            return Verdict.UNRESOLVED
        return Verdict.HOLDS if up == (direction == "rises") else Verdict.FAILS
    if direction not in ("u-shaped", "peaks"):
        raise ValueError(f"unknown direction {direction!r}")
    dips = direction == "u-shaped"
    if any((_above(first, cis[x]) and _above(last, cis[x])) if dips
           else (_above(cis[x], first) and _above(cis[x], last)) for x in xs[1:-1]):
        return Verdict.HOLDS
    monotone = all(cis[a][0] <= cis[b][0] for a, b in pairwise(xs)) or \
        all(cis[a][0] >= cis[b][0] for a, b in pairwise(xs))
    return Verdict.FAILS if monotone and (_above(first, last) or _above(last, first)) \
        else Verdict.UNRESOLVED


def judge(check: Check, by_method: Mapping[str, Sequence[float]] | None = None,
          along: Mapping[float, Sequence[float]] | None = None) -> Verdict:
    """`check` against per-seed measurements: by method for higher/lower, by swept value for a
    trend. A method or a swept range that was not measured leaves the claim unresolved."""
    if check.kind == "trend":
        return trend(along or {}, check.direction)
    by_method = by_method or {}
    if check.method not in by_method or any(m not in by_method for m in check.than):
        return Verdict.UNRESOLVED
    return compare(by_method[check.method], {m: by_method[m] for m in check.than},
                   higher=check.kind == "higher")
