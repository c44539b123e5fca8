"""One experiment of a paper at one budget: its arms, run, measured, and each of the paper's claims
for that experiment judged on the measurements.

A claim names methods the way the paper does, optionally with a point ("Similarity (J=5)") and a
`condition` ("tau_a = 5, level = extreme"); an arm matches when its method is that name and its
point agrees. A comparison is made point by point: each arm of the claimed method against the
arms of the other methods at the same point of every axis neither side names (the same graph,
the same tau_a), and the claim holds when it holds at every point, fails when it fails at one.
A trend runs along an axis of the arms (theta0, J, tau_a) or along a series inside each run
(round, S).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.reproduce.arms import Arm
from bench.reproduce.judge import Verdict, compare, trend
from bench.reproduce.measures import Measured
from bench.reproduce.paperdata import Check, Claim
from bench.seedstats import mean_ci

Results = dict[Arm, list[Measured]]


@dataclass(frozen=True)
class Figure:
    kind: Literal["bars", "along", "curves"]
    """bars: `metric` per arm; along: `metric` against the arms' axis `x`, a line per method;
    curves: a series of each run along `axis` (`metric` against round, or against another
    metric of the same series, `x` = bits_per_client; or H against S)."""
    metric: str
    x: str = ""
    axis: str = "round"


@dataclass(frozen=True)
class Recipe:
    """An experiment at a budget: what to run and what to show."""

    arms: tuple[Arm, ...]
    seeds: tuple[int, ...]
    common: Mapping[str, Any]
    """Settings of every arm (rounds, dataset, model, ...)."""
    columns: tuple[str, ...]
    """The metrics of its table."""
    figure: Figure
    notes: tuple[str, ...] = ()
    """How this budget differs from the paper's setting, one line each."""
    findings: Mapping[int, Callable[[Results], str]] = field(default_factory=dict)
    """Measurements that show the paper's inconsistency number k (its index in the data file)."""
    derive: Callable[[Results], None] | None = None
    """Adds scalars that need several runs (DSC's Delta against the same seed's no-aggregation
    run), before the claims are judged."""


@dataclass
class Judged:
    claim: Claim
    verdict: Verdict | None
    """None: no check (the report gives the claim's why_unchecked)."""
    details: list[str]


def parse_point(text: str) -> dict[str, str]:
    """"tau_a = 5, level = extreme" -> {"tau_a": "5", "level": "extreme"}; "graph != Comp"
    excludes a value: {"graph": "!Comp"}."""
    out = {}
    for part in filter(None, (p.strip() for p in re.split(r"[,;]", text))):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"a point is KEY = VALUE or KEY != VALUE, got {part!r}")
        negated = key.rstrip().endswith("!")
        out[key.strip().rstrip("!").strip()] = ("!" if negated else "") + value.strip()
    return out


def parse_method(spec: str) -> tuple[str, dict[str, str]]:
    """"Similarity (J=5)" -> ("Similarity", {"J": "5"}); a name without a point is itself."""
    m = re.fullmatch(r"(.+?)\s*\(([^()]*=[^()]*)\)", spec.strip())
    return (m.group(1), parse_point(m.group(2))) if m else (spec.strip(), {})


def same(a: Any, b: Any) -> bool:
    try:
        return math.isclose(float(a), float(b))
    except (TypeError, ValueError):
        return str(a) == str(b)


def matches(arm: Arm, name: str, point: Mapping[str, str]) -> bool:
    """`*` is every method: a trend the paper claims for every curve of a figure."""
    return name in (arm.method, "*") and all(
        k in arm.at and (not same(arm.at[k], v[1:]) if v.startswith("!")
                         else same(arm.at[k], v)) for k, v in point.items())


def scalar(results: Results, arm: Arm, metric: str) -> list[float]:
    return [m.scalars[metric] for m in results[arm] if metric in m.scalars]


def at_bits(measured: Measured, bits: float) -> float:
    """The accuracy of a run's last evaluation made within `bits` per client (NaN: none)."""
    series = measured.series.get("round", {})
    seen = [(series["bits_per_client"][r], acc) for r, acc in
            sorted(series.get("accuracy", {}).items()) if r in series.get("bits_per_client", {})]
    within = [acc for b, acc in seen if b <= bits * (1 + 1e-9)]
    return within[-1] if within else math.nan


def judge_claim(claim: Claim, results: Results) -> Judged:
    check = claim.check
    if check is None:
        return Judged(claim, None, [])
    condition = parse_point(check.condition)
    name, point = parse_method(check.method)
    mine = [a for a in results if matches(a, name, {**point, **condition})]
    if not mine:
        return Judged(claim, Verdict.UNRESOLVED, [f"no run of {check.method} here"])
    if check.kind == "trend":
        return judge_trend(claim, check, mine, results)
    details, verdicts = [], []
    for arm in mine:
        named = set(point) | set(condition)
        others: dict[str, Arm] = {}
        for spec in check.than:
            o_name, o_point = parse_method(spec)
            free = named | set(o_point)
            found = [a for a in results if matches(a, o_name, {**o_point, **{
                k: v for k, v in condition.items() if k in a.at}}) and all(
                same(a.at[k], arm.at[k]) for k in set(a.at) & set(arm.at) - free)]
            if found:
                others[spec] = found[0]
        if len(others) < len(check.than):
            missing = sorted(set(check.than) - set(others))
            details.append(f"{arm.label()}: no run of {', '.join(missing)} at this point")
            verdicts.append(Verdict.UNRESOLVED)
            continue
        values = per_metric(check, arm, others, results)
        verdict = compare(values[arm.label()], {k: values[o.label()] for k, o in others.items()},
                          higher=check.kind == "higher")
        verdicts.append(verdict)
        details.append(f"{arm.label()}: " + "; ".join(
            f"{label} {fmt_ci(v)}" for label, v in values.items()) + f" -> {verdict}")
    return Judged(claim, combine(verdicts), details)


def per_metric(check: Check, arm: Arm, others: Mapping[str, Arm],
               results: Results) -> dict[str, list[float]]:
    """Per-seed values of the check's metric for the arm and the arms it is compared with;
    accuracy_at_equal_bits reads every run's accuracy at the fewest bits any of them ended at."""
    arms = [arm, *others.values()]
    if check.metric != "accuracy_at_equal_bits":
        return {a.label(): scalar(results, a, check.metric) for a in arms}
    budget = min((m.scalars["bits_per_client"] for a in arms for m in results[a]
                  if "bits_per_client" in m.scalars), default=math.nan)
    return {a.label(): [v for m in results[a] if not math.isnan(v := at_bits(m, budget))]
            for a in arms}


def judge_trend(claim: Claim, check: Check, mine: list[Arm], results: Results) -> Judged:
    along = check.along
    details, verdicts = [], []
    if all(along in a.at for a in mine):
        groups: dict[tuple[tuple[str, str], ...], list[Arm]] = {}
        for a in mine:
            key = (("method", a.method),
                   *sorted((k, str(v)) for k, v in a.at.items() if k != along))
            groups.setdefault(key, []).append(a)
        for key, arms in groups.items():
            points = {float(a.at[along]): scalar(results, a, check.metric) for a in arms}
            verdict = trend(points, check.direction)
            verdicts.append(verdict)
            where = ", ".join(f"{k}={v}" for k, v in key)
            details.append(f"{where or 'all'}: " + "; ".join(
                f"{along}={x:g} {fmt_ci(v)}" for x, v in sorted(points.items()))
                + f" -> {verdict}")
    else:
        for a in mine:
            runs = [m.series.get(along, {}).get(check.metric, {}) for m in results[a]]
            xs = sorted(set.intersection(*(set(r) for r in runs))) if runs else []
            points = {x: [r[x] for r in runs] for x in xs}
            verdict = trend(points, check.direction)
            verdicts.append(verdict)
            shown = xs if len(xs) <= 6 else [xs[0], xs[len(xs) // 2], xs[-1]]
            details.append(f"{a.label()}: " + "; ".join(
                f"{along}={x:g} {fmt_ci(points[x])}" for x in shown) + f" -> {verdict}")
    return Judged(claim, combine(verdicts), details)


def combine(verdicts: Sequence[Verdict]) -> Verdict:
    if Verdict.FAILS in verdicts:
        return Verdict.FAILS
    if verdicts and all(v == Verdict.HOLDS for v in verdicts):
        return Verdict.HOLDS
    return Verdict.UNRESOLVED


def fmt_ci(values: Sequence[float]) -> str:
    if not values:
        return "-"
    mean, half = mean_ci(list(values))
    return f"{mean:.4g}" if math.isnan(half) else f"{mean:.4g} +- {half:.2g}"
