"""Overlay plots of a report's groups: one line per group (mean over its seeds), with a band
from the lowest to the highest seed, so groups are compared on one set of axes.

Per table: average client accuracy against the round (every family; named as the family's
lead protocol names its `score`), worst client accuracy against the round (families whose
table asks for it, `ReportTable.worst_plot`), and average accuracy against cumulative formula
bits per client (where every group counts formula bits; log scale when they span more than two
decades). Seeds are aligned by
round, over the rounds every seed of the group evaluated.

PNG bytes only, drawn on a bare Figure (no pyplot state, no display needed).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from launcher.results.report import Table
from launcher.results.report_groups import Group
from launcher.results.report_runs import CurvePoint

Axis = Callable[[CurvePoint], float]
LINESTYLES = ("-", "--", ":", "-.")
COLOURS = 10  # matplotlib's default cycle; styles change after it


@dataclass(frozen=True)
class Plot:
    name: str  # file name: {family}-{eval split}-{kind}.png
    title: str
    png: bytes


@dataclass(frozen=True)
class Kind:
    name: str
    xlabel: str
    ylabel: str
    x: Axis
    y: Axis


def accuracy_label(table: Table) -> str:
    return f"average {table.described.score.name}"


def kinds(table: Table) -> list[Kind]:
    """The plots this table gets; none when no run left evaluations in metrics.jsonl."""
    if not any(run.curve for row in table.rows for run in row.group.runs):
        return []
    out = [Kind("accuracy-vs-round", "round", accuracy_label(table),
                lambda p: p.round, lambda p: p.avg_accuracy)]
    if table.described.table.worst_plot:
        out.append(Kind("worst-vs-round", "round", "worst client accuracy",
                        lambda p: p.round, lambda p: p.worst_accuracy))
    if all(run.curve and run.curve[-1].bits_per_client > 0
           for row in table.rows for run in row.group.runs):
        out.append(Kind("accuracy-vs-bits", "formula bits per client (cumulative)",
                        accuracy_label(table), lambda p: p.bits_per_client,
                        lambda p: p.avg_accuracy))
    return out


def aligned(group: Group, kind: Kind) -> tuple[np.ndarray, np.ndarray]:
    """x (mean over seeds) and y (one row per seed) at the rounds every seed evaluated."""
    curves = [{p.round: p for p in run.curve} for run in group.runs]
    rounds = sorted(set.intersection(*(set(c) for c in curves)))
    x = np.array([[kind.x(c[r]) for r in rounds] for c in curves]).mean(axis=0)
    y = np.array([[kind.y(c[r]) for r in rounds] for c in curves])
    return x, y


def draw(table: Table, kind: Kind) -> bytes:
    fig = Figure(figsize=(7.5, 4.6), dpi=100)
    ax = fig.add_subplot()
    spread = []
    for k, row in enumerate(table.rows):
        x, y = aligned(row.group, kind)
        if not len(x):
            continue
        style = LINESTYLES[(k // COLOURS) % len(LINESTYLES)]
        line, = ax.plot(x, y.mean(axis=0), style, marker="." if len(x) < 30 else None,
                        label=f"{row.group.label} (n={len(row.group.runs)})")
        ax.fill_between(x, y.min(axis=0), y.max(axis=0), color=line.get_color(), alpha=0.18,
                        linewidth=0)
        spread += [v for v in x if v > 0]
    if kind.name == "accuracy-vs-bits" and spread and max(spread) > 100 * min(spread):
        ax.set_xscale("log")
    ax.set(xlabel=kind.xlabel, ylabel=kind.ylabel, title=f"{table.title}")
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=7, frameon=False)
    out = io.BytesIO()
    fig.savefig(out, format="png", bbox_inches="tight", metadata={"Software": None})
    return out.getvalue()


def table_plots(table: Table) -> list[Plot]:
    return [Plot(f"{table.slug}-{kind.name}.png", f"{kind.ylabel} vs {kind.xlabel}",
                 draw(table, kind)) for kind in kinds(table)]
