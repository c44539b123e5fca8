"""One figure of the suite, and the one way figures are measured: interleaved repetitions.

Why ratios: absolute times on a shared 2-core machine move by tens of percent from minute to
minute, but two things measured in turn within the same minute move together. So every figure
that has a reference (raw pyzmq, the ideal round, inproc, the formula) is measured beside it,
alternating A, B, A, B, ... for `reps` rounds, and the figure is the median over repetitions
of each side, with their ratio.

A group that could not measure still has its row: a figure whose outcome is "skipped" (what it
needs is missing, e.g. its dataset, or it runs with --full only), "failed" (it raised) or
"interrupted" (a stop signal came while it ran), with the reason in one line, so a suite run
always ends with the whole table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

Outcome = Literal["measured", "skipped", "failed", "interrupted"]


@dataclass(frozen=True)
class Figure:
    """A measured value, the reference it is compared with in the same run, and the goal; or,
    with another outcome, a group (or a part of it) that measured nothing and why (`note`)."""

    group: str  # "transport", "overhead", "scale", "compute", "wire", "gpu"
    name: str  # what was measured, e.g. "dense 10M float32, Comm+codec (zmq)"
    value: float | None  # None: not measured
    unit: str  # "GB/s", "s", "MB", "ratio", ...
    reference: str = ""  # what the ratio divides by, e.g. "raw pyzmq DEALER->ROUTER"
    reference_value: float | None = None
    ratio: float | None = None  # value / reference_value, or the figure's own ratio
    goal: str = ""  # e.g. ">= 0.9"
    met: bool | None = None  # whether the goal holds (None: no goal)
    reps: int = 1
    note: str = ""
    extra: dict[str, float | str] = field(default_factory=dict)
    outcome: Outcome = "measured"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def not_measured(group: str, outcome: Outcome, reason: str, detail: str = "") -> Figure:
    """The row of a group that measured nothing: `reason` in one line (whitespace runs folded),
    and `detail` (e.g. the launcher's last output) kept for the JSON only."""
    extra: dict[str, float | str] = {"detail": detail} if detail else {}
    return Figure(group, f"not measured ({outcome})", None, "", note=" ".join(reason.split()),
                  reps=0, extra=extra, outcome=outcome)


def interleaved(runs: Mapping[str, Callable[[], float]], reps: int) -> dict[str, list[float]]:
    """Each callable once per repetition, in turn, `reps` times: {name: [sample per rep]}."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(reps):
        for name, run in runs.items():
            samples[name].append(run())
    return samples


def median(values: list[float]) -> float:
    return statistics.median(values)


def compare(group: str, name: str, value: float, unit: str, reference: str,
            reference_value: float, *, goal_min: float | None = None,
            goal_max: float | None = None, reps: int = 1, note: str = "",
            extra: Mapping[str, float | str] | None = None) -> Figure:
    """A figure with its ratio to a reference measured in the same run, and its goal checked."""
    ratio = value / reference_value if reference_value else float("nan")
    goal, met = goal_text(ratio, goal_min, goal_max)
    return Figure(group, name, value, unit, reference, reference_value, ratio, goal, met, reps,
                  note, dict(extra or {}))


def goal_text(value: float, goal_min: float | None,
              goal_max: float | None) -> tuple[str, bool | None]:
    if goal_min is not None:
        return f">= {goal_min:g}", value >= goal_min
    if goal_max is not None:
        return f"<= {goal_max:g}", value <= goal_max
    return "", None


@dataclass(frozen=True)
class Mode:
    """How much a group of mesh runs measures: `reps` interleaved repetitions of `rounds`."""

    reps: int
    rounds: int
    note: str


def module_main(figures: Callable[[bool], list[Figure]], doc: str, full_help: str) -> None:
    """`python -m bench.<group> [--full]`: that group's figures alone, as the suite's table
    and then as JSON."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--full", action="store_true", help=full_help)
    found = figures(not parser.parse_args().full)
    print(table(found))
    print(json.dumps([fig.as_dict() for fig in found], indent=1))


def cell(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 1e5 else f"{value:.3e}"


def table(figures: list[Figure]) -> str:
    header = (f"{'group':<10} {'figure':<52} {'value':>10} {'unit':<6} {'reference':>10} "
              f"{'ratio':>7} {'goal':>7} {'met':>4} {'reps':>4}")
    rows = [header, "-" * len(header)]
    for f in figures:
        if f.outcome != "measured":
            rows.append(f"{f.group:<10} {f.outcome.upper()}: {f.note}")
            continue
        met = "-" if f.met is None else ("yes" if f.met else "NO")
        rows.append(f"{f.group:<10} {f.name[:52]:<52} {cell(f.value):>10} {f.unit:<6} "
                    f"{cell(f.reference_value):>10} {cell(f.ratio):>7} {f.goal:>7} {met:>4} "
                    f"{f.reps:>4}")
        if f.reference:
            rows.append(f"{'':<10}   reference: {f.reference}")
        if f.note:
            rows.append(f"{'':<10}   {f.note}")
        if f.extra:
            extras = "; ".join(
                f"{key}: {cell(value, 4) if isinstance(value, float) else value}"
                for key, value in f.extra.items())
            rows.extend(textwrap.wrap(extras, len(header), initial_indent=" " * 13,
                                      subsequent_indent=" " * 13))
    return "\n".join(rows)
