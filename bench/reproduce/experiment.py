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
from itertools import product
from typing import Any, Literal

from bench.reproduce.arms import Arm
from bench.reproduce.deviations import Resolved, Stated, classifier_parameters
from bench.reproduce.judge import Verdict, combine, difference, trend
from bench.reproduce.measures import Measured
from bench.reproduce.paperdata import Check, Claim
from bench.seedstats import mean_ci
from launcher.config.layers import run_default

Results = dict[Arm, list[Measured]]
TrainedCheck = Callable[[str, Arm, "Results"], str]


@dataclass(frozen=True)
class Figure:
    kind: Literal["bars", "along", "curves"]
    """bars: `metric` per arm; along: `metric` against the arms' axis `x`, a line per method;
    curves: a series of each run along `axis` (`metric` against round, or against another
    metric of the same series, `x` = bits_per_client; or H against S)."""
    metric: str
    x: str = ""
    axis: str = "round"
    marks_from: str = ""
    """The experiment whose reported numbers are marked on this figure ('': its own), e.g.
    MUSMET's Fig. 8 (accuracy against bits) marked with Table II's accuracy and bits."""


@dataclass(frozen=True)
class Cost:
    """What a run of a recipe's arms costs here, measured (wall seconds on this machine kind,
    2 cores): what the estimate printed before a budget starts is made of, so that the paper
    budget's estimate follows that budget's own model, rounds and evaluations."""

    per_round: Mapping[str, float]
    """A round of the whole mesh, by protocol ("*": any other)."""
    per_eval: float | Mapping[str, float] = 0.0
    """One evaluation of every client (eval_every rounds, the last, and round 0 when asked),
    by protocol ("*": any other) where protocols evaluate on other test sets."""
    start: float = 5.0
    """Start-up and the end of a run (data, processes, final files)."""

    def seconds(self, protocol: str, settings: Mapping[str, Any]) -> float:
        rounds = int(settings.get("rounds", run_default(protocol, "rounds")))
        every = int(settings.get("eval_every", run_default(protocol, "eval_every")))
        evals = rounds // every + (rounds % every != 0) + bool(settings.get("eval_at_start"))
        per_round = self.per_round.get(protocol, self.per_round.get("*", 0.0))
        per_eval = self.per_eval if isinstance(self.per_eval, float | int) else \
            self.per_eval.get(protocol, self.per_eval.get("*", 0.0))
        return self.start + rounds * per_round + evals * per_eval


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
    stated: Mapping[str, Stated] = field(default_factory=dict)
    """What the paper states for each setting of the deviation table (deviations.SETTINGS;
    absent: not stated)."""
    why: Mapping[str, str] = field(default_factory=dict)
    """Why this budget's value of a setting differs from the paper's (every difference has
    one: tests/test_reproduce.py)."""
    proxy: str = ""
    """What makes the runs a proxy of the paper's experiment (another dataset, model or
    learning rate), said on the line of every claim judged on them; '' for the paper's own
    setting."""
    parameters: Callable[[Resolved], int | None] = classifier_parameters
    """P of an arm's model, for the table (a protocol with a model of its own counts it)."""
    cut: Mapping[str, str] = field(default_factory=dict)
    """Methods a claim names that this budget does not run, each with why (medium: to keep
    an experiment within its hour with the proposed method trained). A comparison with one is
    not resolved and says so; a claim may still fail on the comparisons that were made."""
    cost: Cost = Cost({"*": 1.0})
    """Measured here; the estimate of the runs left."""
    trained: TrainedCheck | None = None
    """Why an arm's models do not count as trained for a claim on a metric ('' if they do);
    None: `not_trained` (classification accuracies against the majority-class share). A
    recipe whose models are not classifiers (DSC's dense tasks) brings its own."""


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


ACCURACY_METRICS = frozenset({
    "avg_accuracy", "worst_accuracy", "bottom10_accuracy", "std_accuracy", "jain_index",
    "avg_model_accuracy", "accuracy", "global_accuracy", "accuracy_at_equal_bits"})
"""Metrics read from classification accuracies: a claim on them is judged only on models that
beat the majority-class share (`majority:` keys, bench/reproduce/measures.py)."""


def bar_metric(metric: str) -> str | None:
    """The accuracy key whose majority-class bar decides whether `metric`'s models trained."""
    if metric in ("accuracy_at_equal_bits", "accuracy"):
        return "avg_accuracy"
    if metric == "global_accuracy":
        return "global_avg_accuracy"
    if metric in ACCURACY_METRICS or (metric.startswith("global_") and
                                      metric.removeprefix("global_") in ACCURACY_METRICS):
        return metric
    return None


def seeded(results: Results, arm: Arm) -> list[tuple[int, Measured]]:
    """An arm's runs with their seeds (a run's position when it does not know its seed)."""
    return [(i if m.seed is None else m.seed, m) for i, m in enumerate(results[arm])]


def scalar(results: Results, arm: Arm, metric: str) -> dict[int, float]:
    return {s: m.scalars[metric] for s, m in seeded(results, arm) if metric in m.scalars}


def curve_at(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """The piecewise-linear curve through (xs, ys), xs ascending, at x (NaN outside it)."""
    if not xs or x < xs[0] * (1 - 1e-9) or x > xs[-1] * (1 + 1e-9):
        return math.nan
    for (x0, y0), (x1, y1) in zip(zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True),
                                  strict=False):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return ys[-1] if math.isclose(x, xs[-1]) else ys[0]


def accuracy_bits_curve(measured: Measured) -> tuple[list[float], list[float]]:
    """A run's evaluations as (bits per client so far, mean accuracy), by bits."""
    series = measured.series.get("round", {})
    bits, accuracy = series.get("bits_per_client", {}), series.get("accuracy", {})
    points = sorted((bits[r], accuracy[r]) for r in accuracy if r in bits)
    return [p[0] for p in points], [p[1] for p in points]


@dataclass
class Judged:
    claim: Claim
    verdict: Verdict | None
    """None: no check (the report gives the claim's why_unchecked)."""
    details: list[str]


def judge_claim(claim: Claim, results: Results, trained: TrainedCheck | None = None,
                cut: Mapping[str, str] | None = None) -> Judged:
    """`trained`: the recipe's own check of whether an arm's models trained (default:
    `not_trained`); `cut`: the methods this budget does not run, with why."""
    untrained = trained or not_trained
    cut = cut or {}
    check = claim.check
    if check is None:
        return Judged(claim, None, [])
    condition = parse_point(check.condition)
    name, point = parse_method(check.method)
    mine = [a for a in results if matches(a, name, {**point, **condition})]
    if not mine:
        return Judged(claim, Verdict.NOT_MEASURED, [f"no run of {check.method} here"])
    if check.kind == "trend":
        return judge_trend(claim, check, mine, results, untrained)
    details, verdicts = [], []
    for arm in mine:
        others = counterparts(check, arm, condition, results)
        skipped = [spec for spec, found in others.items()
                   if not found and parse_method(spec)[0] in cut]
        for spec in skipped:
            details.append(f"{arm.label()} against {spec}: not run at this budget "
                           f"({cut[parse_method(spec)[0]]}) -> {Verdict.UNRESOLVED}")
            verdicts.append(Verdict.UNRESOLVED)
            del others[spec]
        missing = [spec for spec, found in others.items() if not found]
        if missing:
            details.append(f"{arm.label()}: no run of {', '.join(missing)} at this point")
            verdicts.append(Verdict.NOT_MEASURED)
            continue
        if not others:
            continue
        for against in product(*others.values()):
            verdict, line = judge_pair(check, arm, against, results, untrained)
            verdicts.append(verdict)
            details.append(line)
    return Judged(claim, combine(verdicts), details)


def counterparts(check: Check, arm: Arm, condition: Mapping[str, str],
                 results: Results) -> dict[str, list[Arm]]:
    """The arms each of `check.than` names at `arm`'s point: the same value on every axis both
    have, except the axes the two method names set themselves ("Similarity (J=5)" against
    "Similarity (J=1)"). A condition selects arms; it frees no axis, so that a claim made
    "where graph != Comp" compares the PrefA arm with the PrefA baseline."""
    _, point = parse_method(check.method)
    found: dict[str, list[Arm]] = {}
    for spec in check.than:
        o_name, o_point = parse_method(spec)
        free = set(point) | set(o_point)
        found[spec] = [a for a in results if a is not arm and matches(a, o_name, {**o_point, **{
            k: v for k, v in condition.items() if k in a.at}}) and all(
            same(a.at[k], arm.at[k]) for k in set(a.at) & set(arm.at) - free)]
    return found


def judge_pair(check: Check, arm: Arm, others: Sequence[Arm], results: Results,
               untrained: TrainedCheck) -> tuple[Verdict, str]:
    """One arm against one arm of each compared method."""
    values, apart, where = per_metric(check, arm, others, results)
    shown = where + "; ".join(f"{a.label()} {fmt_ci(list(values[a].values()))}"
                              for a in (arm, *others))
    if apart:
        return Verdict.UNRESOLVED, f"{arm.label()}: {apart} -> {Verdict.UNRESOLVED}"
    lacking = [a.label() for a in (arm, *others) if not values[a]]
    if lacking:
        return Verdict.NOT_MEASURED, (f"{arm.label()}: {check.metric} was not measured for "
                                      f"{', '.join(lacking)} -> {Verdict.NOT_MEASURED}")
    reasons = [line for a in (arm, *others) if (line := untrained(check.metric, a, results))]
    if reasons:
        return Verdict.NOT_TRAINED, (f"{arm.label()}: {shown}; not judged: "
                                     + "; ".join(reasons) + f" -> {Verdict.NOT_TRAINED}")
    higher = check.kind == "higher"
    parts, verdicts = [], []
    for other in others:
        found = difference(values[arm], values[other]) if higher else \
            difference(values[other], values[arm])
        verdict = Verdict.NOT_MEASURED if found is None else found.verdict()
        verdicts.append(verdict)
        if found is not None:
            parts.append(f"{arm.method} - {other.method}: {found.text()}" if higher
                         else f"{other.method} - {arm.method}: {found.text()}")
    verdict = combine(verdicts)
    return verdict, f"{arm.label()}: {shown}; " + "; ".join(parts) + f" -> {verdict}"


def not_trained(metric: str, arm: Arm, results: Results) -> str:
    """Why `arm`'s models count as not trained for a claim on `metric` ('' if they trained, or
    the metric is not an accuracy): on every seed, the run's accuracy must beat the
    majority-class share of the test split it is read on. Per run, not on an interval over
    seeds: a run whose clients score no better than always answering their most frequent
    class has learned nothing the claim could compare, whatever the other seeds did.

    A method whose clients share one model (Arm.shared_model: D-PSGD's consensus, q-FFL's
    server model) is judged on the global test subset when the runs evaluated it: its
    consensus cannot fit each client's label skew, so on the clients' own splits it may score
    below their majority class while it learned the task; there the bar is the subset's
    majority class, about chance."""
    key = bar_metric(metric)
    if key is None:
        return ""
    if arm.shared_model and not key.startswith("global_") and \
            scalar(results, arm, f"majority:global_{key}"):
        key = f"global_{key}"
    accuracy, bar = scalar(results, arm, key), scalar(results, arm, f"majority:{key}")
    seeds = sorted(set(accuracy) & set(bar))
    if not seeds:
        return ""
    margins = {s: accuracy[s] - bar[s] for s in seeds}
    if all(m > 0 for m in margins.values()):
        return ""
    behind = [s for s, m in margins.items() if m <= 0]
    where = "the global subset's" if key.startswith("global_") else "its clients'"
    return (f"{arm.label()}'s {key} does not beat {where} majority-class share on seed "
            + ", ".join(f"{s} ({accuracy[s]:.4g} against {bar[s]:.4g})" for s in behind))


def per_metric(check: Check, arm: Arm, others: Sequence[Arm],
               results: Results) -> tuple[dict[Arm, dict[int, float]], str, str]:
    """Per-seed values of the check's metric for the arm and the arms it is compared with;
    why they cannot be compared ('' when they can); where they were read ('' for a scalar).

    accuracy_at_equal_bits reads every run's accuracy-versus-bits curve (round 0 at 0 bits
    under eval_at_start), linearly between evaluations, at the fewest bits any of them ended
    at. Where a curve starts after that budget, the ranges do not overlap: said so, and not
    resolved (a budget that evaluates at the start avoids it)."""
    arms = [arm, *others]
    if check.metric != "accuracy_at_equal_bits":
        return {a: scalar(results, a, check.metric) for a in arms}, "", ""
    curves = {a: {s: accuracy_bits_curve(m) for s, m in seeded(results, a)} for a in arms}
    ends = [(xs[-1], xs[0], a) for a, by_seed in curves.items()
            for xs, _ in by_seed.values() if xs]
    if not ends:
        return {a: {} for a in arms}, "", ""
    budget, start = min(e[0] for e in ends), max(e[1] for e in ends)
    if start > budget:
        late = next(e[2] for e in ends if e[1] == start)
        early = next(e[2] for e in ends if e[0] == budget)
        return {a: {} for a in arms}, (
            f"the accuracy-versus-bits curves do not overlap: {early.label()} ends at "
            f"{budget:.3g} bits per client, {late.label()} is first evaluated at {start:.3g}"), ""
    values = {a: {s: curve_at(xs, ys, budget) for s, (xs, ys) in by_seed.items() if xs}
              for a, by_seed in curves.items()}
    return values, "", f"at {budget:.3g} bits per client: "


def judge_trend(claim: Claim, check: Check, mine: list[Arm], results: Results,
                untrained: TrainedCheck) -> Judged:
    along = check.along
    details, verdicts = [], []
    if all(along in a.at for a in mine):
        groups: dict[tuple[tuple[str, str], ...], list[Arm]] = {}
        for a in mine:
            key = (("method", a.method),
                   *sorted((k, str(v)) for k, v in a.at.items() if k != along))
            groups.setdefault(key, []).append(a)
        for key, arms in groups.items():
            where = ", ".join(f"{k}={v}" for k, v in key)
            reasons = [line for a in arms if (line := untrained(check.metric, a, results))]
            points = {float(a.at[along]): scalar(results, a, check.metric) for a in arms}
            verdict = Verdict.NOT_TRAINED if reasons else trend(points, check.direction)
            verdicts.append(verdict)
            details.append(f"{where or 'all'}: " + "; ".join(
                f"{along}={x:g} {fmt_ci(list(v.values()))}" for x, v in sorted(points.items()))
                + ("; not judged: " + "; ".join(reasons) if reasons else "")
                + f" -> {verdict}")
    else:
        for a in mine:
            runs = {s: m.series.get(along, {}).get(check.metric, {}) for s, m in seeded(results, a)}
            xs = sorted(set.intersection(*(set(r) for r in runs.values()))) if runs else []
            if along == "round":  # from the first evaluation of trained models (round 0: none)
                xs = [x for x in xs if x > 0]
            series_points = {x: {s: r[x] for s, r in runs.items()} for x in xs}
            why = untrained(check.metric, a, results)
            verdict = Verdict.NOT_TRAINED if why else trend(series_points, check.direction)
            verdicts.append(verdict)
            shown = xs if len(xs) <= 6 else [xs[0], xs[len(xs) // 2], xs[-1]]
            details.append(f"{a.label()}: " + "; ".join(
                f"{along}={x:g} {fmt_ci(list(series_points[x].values()))}" for x in shown)
                + (f"; not judged: {why}" if why else "") + f" -> {verdict}")
    return Judged(claim, combine(verdicts), details)


def fmt_ci(values: Sequence[float]) -> str:
    if not values:
        return "-"
    mean, half = mean_ci(list(values))
    return f"{mean:.4g}" if math.isnan(half) else f"{mean:.4g} +- {half:.2g}"
