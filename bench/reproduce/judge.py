"""A paper's claim against our measurement: five verdicts, judged on paired differences.

Every arm of an experiment runs the same seeds (the same data split, initial model and batch
order per seed), so two arms are compared seed by seed: the claim "A is higher than B" is
judged on the differences A_s - B_s over the shared seeds, with a 95% t-interval, which removes
the seed-to-seed variation both arms share (unpaired intervals of each arm's mean overlap far
more often). A quantity that is the same for every seed (bits of a fixed schedule, a number
of clusters a deterministic pre-phase chooses) has no interval to wait for: it is judged
directly, and a tie does not hold.

- holds: the differences' interval lies wholly on the claimed side of 0 (a deterministic
  difference: is on it);
- does not hold: the interval lies wholly on the other side (deterministic: 0 or beyond);
- not resolved: the interval contains 0, or one seed gives none;
- not measured: a metric the claim needs was not computed, or no seed has both arms: a
  defect of the recipe, never a budget's outcome (the quick test fails on it);
- not trained: a model the claim's accuracy is read from does not beat the majority-class
  share of its own test split (chance, on a global test set): the claim is not judged on it
  (bench/reproduce/experiment.py decides this, before any comparison).

A trend compares the ends of the swept range the same way; a U-shape needs an interior value
decisively below both ends, a peak one above both, and fails when every interior value is
decisively above (below) an end.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from bench.seedstats import mean_ci


class Verdict(StrEnum):
    HOLDS = "holds"
    FAILS = "does not hold"
    UNRESOLVED = "not resolved"
    NOT_MEASURED = "not measured"
    NOT_TRAINED = "not trained"


PerSeed = Mapping[int, float]
"""One arm's values of one metric, by seed."""


@dataclass(frozen=True)
class Difference:
    """better - worse over the seeds both have."""

    mean: float
    half: float
    """Half-width of the 95% t-interval (NaN with one seed, 0 when deterministic)."""
    seeds: tuple[int, ...]
    deterministic: bool
    """Every difference the same (at least two seeds): judged without an interval."""

    def verdict(self) -> Verdict:
        if self.deterministic:
            return Verdict.HOLDS if self.mean > 0 else Verdict.FAILS
        if math.isnan(self.half):
            return Verdict.UNRESOLVED
        if self.mean - self.half > 0:
            return Verdict.HOLDS
        if self.mean + self.half < 0:
            return Verdict.FAILS
        return Verdict.UNRESOLVED

    def text(self) -> str:
        if self.deterministic:
            return f"{self.mean:+.4g} (the same on seeds {list(self.seeds)})"
        spread = "" if math.isnan(self.half) else f" +- {self.half:.2g}"
        return f"{self.mean:+.4g}{spread} (paired over seeds {list(self.seeds)})"


def difference(better: PerSeed, worse: PerSeed) -> Difference | None:
    """None when no seed has both."""
    seeds = tuple(sorted(set(better) & set(worse)))
    if not seeds:
        return None
    diffs = [better[s] - worse[s] for s in seeds]
    deterministic = len(diffs) > 1 and all(
        math.isclose(d, diffs[0], rel_tol=1e-12, abs_tol=1e-12) for d in diffs)
    if deterministic:
        return Difference(diffs[0], 0.0, seeds, True)
    mean, half = mean_ci(diffs)
    return Difference(mean, half, seeds, False)


def verdict_of(better: PerSeed, worse: PerSeed) -> Verdict:
    found = difference(better, worse)
    return Verdict.NOT_MEASURED if found is None else found.verdict()


def compare(mine: PerSeed, others: Mapping[str, PerSeed], higher: bool) -> Verdict:
    """`mine` higher (or lower) than every one of `others`."""
    return combine(verdict_of(mine, o) if higher else verdict_of(o, mine)
                   for o in others.values())


def trend(points: Mapping[float, PerSeed], direction: str) -> Verdict:
    """Per seed values at each swept value: do they rise, fall, or dip in the middle?"""
    xs = sorted(x for x in points if points[x])
    if len(xs) < 2 or (direction in ("u-shaped", "peaks") and len(xs) < 3):
        return Verdict.NOT_MEASURED
    first, last = points[xs[0]], points[xs[-1]]
    if direction == "rises":
        return verdict_of(last, first)
    if direction == "falls":
        return verdict_of(first, last)
    if direction not in ("u-shaped", "peaks"):
        raise ValueError(f"unknown direction {direction!r}")
    dips = direction == "u-shaped"
    inner = []
    for x in xs[1:-1]:
        mid = points[x]
        ends = (verdict_of(first, mid), verdict_of(last, mid)) if dips else \
            (verdict_of(mid, first), verdict_of(mid, last))
        inner.append(ends)
    if any(a == b == Verdict.HOLDS for a, b in inner):
        return Verdict.HOLDS
    if all(Verdict.FAILS in ends for ends in inner):
        return Verdict.FAILS
    return Verdict.UNRESOLVED


PRECEDENCE = (Verdict.NOT_MEASURED, Verdict.FAILS, Verdict.NOT_TRAINED, Verdict.UNRESOLVED)


def combine(verdicts: Iterable[Verdict]) -> Verdict:
    """A claim judged at several points (or against several methods): a defect first, then it
    fails where it fails at one point, is not judged where a model did not train, is not
    resolved where one point is not, and holds where it holds at every point."""
    seen = list(verdicts)
    if not seen:
        return Verdict.NOT_MEASURED
    for verdict in PRECEDENCE:
        if verdict in seen:
            return verdict
    return Verdict.HOLDS
