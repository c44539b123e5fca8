"""What the launcher shows of a protocol, declared by the protocol itself.

The launcher (`dfl-launch`, its progress view and plots, `dfl-report`) knows no protocol by
name: it reads these declarations, fields of `protocols.declaration.ProtocolDeclaration`,
through `protocols.registry`. A new protocol names its report family and inherits the rest;
one that reports something other than a classification accuracy says so here.

Only plain data and small functions over summary and metrics records live here, so the
launcher can use them without knowing where a protocol's internals are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Summary = Mapping[str, Any]  # a run's summary.json
Extract = Callable[[Summary], float | None]


@dataclass(frozen=True)
class Column:
    """One column of a `dfl-report` table: a number read from each run's summary.json."""

    key: str
    header: str
    unit: str  # how a value reads: "fraction", "bits", "cycles", "percent", "norm"
    extract: Extract


@dataclass(frozen=True)
class ReportTable:
    """A paper's table in `dfl-report`. The family's lead protocol (the one registered under
    the family's name) declares it; every member names the family in `report_family`."""

    title: str
    # The columns, given the summaries of every run in the table (some depend on what the
    # runs hold, e.g. the thresholds they were configured with).
    columns: Callable[[Sequence[Summary]], list[Column]]
    # An overlay of the worst client's accuracy against the round, for a paper whose claims
    # are about the tail.
    worst_plot: bool = False
    # The member protocols in row order; members not named come after, by name.
    rows: tuple[str, ...] = ()
    # Where the table comes in dfl-report (and its members in the protocol table): lower first;
    # tables of the same position by lead protocol's name.
    position: int = 100


@dataclass(frozen=True)
class Score:
    """What the `accuracy` key of this protocol's metrics records holds, as views name it."""

    name: str  # in axis labels and titles: "average {name}", "final {name}"
    short: str  # the progress table's column, "{short} avg"


ACCURACY = Score("accuracy", "acc")

# node -> task -> metric -> value: the `task_metrics` of the evaluations of one round
NodeTaskMetrics = Mapping[int, Mapping[str, Mapping[str, float]]]


@dataclass(frozen=True)
class Task:
    """One task of a multi-task protocol: its headline metric, as the task plots draw it."""

    metric: str  # the key inside the task's `task_metrics`
    higher_is_better: bool
    label: str  # the axis label, with its unit


@dataclass(frozen=True)
class MultiTask:
    """Nodes that each learn several tasks. Their metrics records carry `task_metrics`
    ({task: {metric: value}}) and summary.json `delta_tasks` and `delta_all` (% gain over a
    baseline run, when the hyper-parameter `baseline` names one); a run of such a protocol
    gets task plots instead of accuracy curves."""

    tasks: Mapping[str, Task]
    baseline: str  # the hyper-parameter holding the baseline run's directory
    baseline_name: str  # what the baseline is, in the delta figure: "the {name} baseline"
    delta_source: str  # where Delta is defined, in the delta figure's title: "Δ as {source}"
    # Delta_all of one round's evaluations against the baseline's at the same round;
    # KeyError when the nodes' tasks differ between the two.
    delta_all: Callable[[NodeTaskMetrics, NodeTaskMetrics], float]


# A dataset a protocol brings: the plan's data options in, the keys it adds to the plan's data
# section out (`num_classes`, `shape`, `eval_size`); ValueError (one line) on bad options.
DatasetPreparer = Callable[[Mapping[str, Any]], dict[str, Any]]


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def summary_key(name: str) -> Extract:
    return lambda summary: number(summary.get(name))


def nested(outer: str, inner: str) -> Extract:
    return lambda summary: number((summary.get(outer) or {}).get(inner))


def cycles(threshold: str) -> Extract:
    """Rounds to an accuracy threshold (per-cycle metrics): None where the run had no such
    threshold, inf where it never reached it."""
    def extract(summary: Summary) -> float | None:
        reached = summary.get("cycles_to_threshold") or {}
        if threshold not in reached:
            return None
        value = number(reached[threshold])
        return math.inf if value is None else value
    return extract


def names_in(summaries: Sequence[Summary], outer: str) -> list[str]:
    """The keys of a mapping in summary.json, over every run, sorted."""
    return sorted({name for summary in summaries for name in (summary.get(outer) or {})})
