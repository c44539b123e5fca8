"""Figures of learning over the run: metric curves, the final distribution, and for a
multi-task protocol its tasks and Delta (what it declares as `ProtocolDeclaration.multitask`).

Each function returns a matplotlib Figure (built without pyplot, so it needs no display and
keeps no global state), so tests can read titles, labels and legends before anything is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from launcher.results.plots_data import (
    Band,
    Row,
    RunFiles,
    band,
    bits_per_client,
    delta_by_round,
    final_scores,
    key,
)
from launcher.results.plots_data import virtual_seconds as clock_at

SIZE = (11.0, 4.6)
DPI = 110
ACCURACY = "accuracy (fraction)"
LOSS = "evaluation loss (nats)"
# How every figure marks an adversarial node: a colour none of the others uses (viridis fills,
# the blue average, the red worst node) and a cross.
ADVERSARY_COLOUR, ADVERSARY_MARKER = "magenta", "X"


@dataclass(frozen=True)
class XAxis:
    """What the curves run against."""

    name: str
    label: str


ROUND = XAxis("round", "round (#)")
BITS = XAxis("bits", "formula bits per client (bit)")
TIME = XAxis("time", "virtual time (s)")


def score_label(run: RunFiles) -> str:
    """The axis label of the metrics' `accuracy`: the protocol's score, a fraction."""
    return f"{run.score.name} (fraction)"


def draw_band(ax: Axes, x: np.ndarray, b: Band, higher_is_better: bool, who: str = "") -> None:
    """Mean, worst node and the per-node range, one series each; `who` ("honest ") names the
    nodes they are over where not all are."""
    ax.fill_between(x, b.low, b.high, alpha=0.25, color="tab:blue",
                    label=f"{who}per-node range")
    ax.plot(x, b.mean, color="tab:blue", marker=".", label=f"{who}average")
    ax.plot(x, b.low if higher_is_better else b.high, color="tab:red", linestyle="--",
            label=f"{who}worst node")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")


def plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def adversaries_label(run: RunFiles) -> str:
    """The legend entry of the adversaries: "adversary (nodes 2, 5)"."""
    ids = run.adversaries
    return f"adversary ({'node' if len(ids) == 1 else 'nodes'} {', '.join(map(str, ids))})"


def draw_adversaries(ax: Axes, run: RunFiles, axis: XAxis, metric: str) -> None:
    """Each adversary's own curve, thin and crossed, one legend entry for all of them."""
    for k, node in enumerate(run.adversaries):
        own = band([row for row in run.rows if row["node"] == node], key(metric))
        x = x_values(run, axis, own.rounds)
        if x is None or not len(own.rounds):
            continue
        ax.plot(x, own.mean, color=ADVERSARY_COLOUR, marker=ADVERSARY_MARKER, linewidth=0.8,
                markersize=5, label=adversaries_label(run) if k == 0 else "_adversary")
    ax.legend(loc="best", fontsize="small")


def integer_rounds(ax: Axes) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def x_values(run: RunFiles, axis: XAxis, rounds: np.ndarray) -> np.ndarray | None:
    if axis is ROUND:
        return rounds.astype(float)
    if axis is TIME:
        return clock_at(run, rounds)
    return bits_per_client(run, rounds)


def curves_figure(run: RunFiles, axis: XAxis) -> Figure | None:
    """Accuracy and loss against `axis`; None when the run has no such axis (no formula bits).
    With adversaries, the band is the honest nodes' and each adversary has its own curve."""
    rows, who = run.honest_rows, "honest " if run.adversaries else ""
    acc, loss = band(rows, key("accuracy")), band(rows, key("loss"))
    if not len(acc.rounds) or not len(loss.rounds):
        return None
    x_acc, x_loss = x_values(run, axis, acc.rounds), x_values(run, axis, loss.rounds)
    if x_acc is None or x_loss is None:
        return None
    fig = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
    left, right = fig.subplots(1, 2)
    if axis is ROUND:
        integer_rounds(left)
        integer_rounds(right)
    draw_band(left, x_acc, acc, higher_is_better=True, who=who)
    left.set(title=f"Accuracy against {axis.name}", xlabel=axis.label, ylabel=ACCURACY)
    draw_band(right, x_loss, loss, higher_is_better=False, who=who)
    right.set(title=f"Loss against {axis.name}", xlabel=axis.label, ylabel=LOSS)
    if run.adversaries:
        draw_adversaries(left, run, axis, "accuracy")
        draw_adversaries(right, run, axis, "loss")
    fig.suptitle(run_title(run))
    return fig


def distribution_figure(run: RunFiles) -> Figure | None:
    """The final per-node accuracy (or task score): how unequal the nodes ended. With
    adversaries, the histogram, average and worst are the honest nodes', and each adversary's
    score is a cross on the axis."""
    final = final_scores(run)
    attackers = {n: v for n, v in final.items() if n in run.plan.adversaries}
    scores = np.array([v for n, v in final.items() if n not in attackers])
    if not len(scores):
        return None
    metric = score_label(run)
    who = "honest " if run.adversaries else ""
    fig = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
    ax = fig.subplots()
    ax.hist(scores, bins=min(20, max(5, len(scores))), color="tab:blue", alpha=0.7,
            edgecolor="white", label=f"{who}nodes")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.axvline(scores.mean(), color="black", label=f"{who}average {scores.mean():.4f}")
    ax.axvline(scores.min(), color="tab:red", linestyle="--",
               label=f"{who}worst {scores.min():.4f}")
    if attackers:
        ax.scatter(list(attackers.values()), np.zeros(len(attackers)), color=ADVERSARY_COLOUR,
                   marker=ADVERSARY_MARKER, s=80, zorder=3, clip_on=False,
                   label=adversaries_label(run))
    ax.set(title=f"Final {metric.split(' (')[0]} per node ({len(scores)} {who}nodes"
                 + (f", {plural(len(attackers), 'adversary', 'adversaries')})" if attackers
                    else ")"),
           xlabel=f"final {metric}", ylabel="nodes (#)")
    ax.legend(loc="best", fontsize="small")
    fig.suptitle(run_title(run))
    return fig


def tasks_figure(run: RunFiles) -> Figure | None:
    """Each task's headline metric over the nodes holding it, and the loss, per round."""
    tasks = sorted({t for row in run.rows for t in row.get("task_metrics", {})})
    if not tasks or run.multitask is None:
        return None
    declared = run.multitask.tasks
    fig = Figure(figsize=(SIZE[0], 3.6 * ((len(tasks) + 2) // 2)), dpi=DPI, layout="constrained")
    axes = fig.subplots((len(tasks) + 2) // 2, 2, squeeze=False).ravel()
    for ax, task in zip(axes, tasks, strict=False):
        name = declared[task].metric

        def metric(row: Row, t: str = task, m: str = name) -> float | None:
            return row.get("task_metrics", {}).get(t, {}).get(m)

        b = band(run.rows, metric)
        draw_band(ax, b.rounds.astype(float), b, higher_is_better=declared[task].higher_is_better)
        integer_rounds(ax)
        ax.set(title=f"Task {task}: {name}", xlabel=ROUND.label, ylabel=declared[task].label)
    loss = band(run.rows, key("loss"))
    draw_band(axes[len(tasks)], loss.rounds.astype(float), loss, higher_is_better=False)
    integer_rounds(axes[len(tasks)])
    axes[len(tasks)].set(title="Loss (sum over the node's tasks)", xlabel=ROUND.label,
                         ylabel=LOSS)
    for ax in axes[len(tasks) + 1:]:
        ax.remove()
    fig.suptitle(run_title(run))
    return fig


def delta_figure(run: RunFiles) -> Figure | None:
    """Delta_all and each task's Delta against the baseline run, in %."""
    delta_all = run.summary.get("delta_all")
    if delta_all is None or run.multitask is None:
        return None
    per_task = run.summary.get("delta_tasks", {})
    names = [*sorted(per_task), "all"]
    values = np.array([*(per_task[t] for t in sorted(per_task)), delta_all])
    curve = delta_by_round(run, run.multitask)
    fig = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
    axes = fig.subplots(1, 2 if curve else 1, squeeze=False).ravel()
    ax = axes[0]
    ax.bar(names[:-1], values[:-1], color="tab:blue", label="Δ per task")
    ax.bar(names[-1:], values[-1:], color="tab:orange", label=f"Δ_all = {delta_all:+.2f} %")
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set(title=f"Final gain over the {run.multitask.baseline_name} baseline",
           xlabel="task (name)", ylabel="Δ (%)")
    ax.legend(loc="best", fontsize="small")
    if curve:
        draw_delta_curve(axes[1], *curve)
    fig.suptitle(f"{run_title(run)}; Δ as {run.multitask.delta_source}")
    return fig


def draw_delta_curve(ax: Axes, rounds: np.ndarray, values: np.ndarray) -> None:
    ax.plot(rounds, values, color="tab:orange", marker="o", label="Δ_all")
    ax.axhline(0.0, color="black", linewidth=0.8, label="no gain")
    integer_rounds(ax)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    ax.set(title="Δ_all against round (baseline at the same round)", xlabel=ROUND.label,
           ylabel="Δ_all (%)")


def run_title(run: RunFiles) -> str:
    s = run.summary
    return (f"{run.plan.protocol} on {run.plan.topology_name}: {len(run.plan.clients)} clients, "
            f"{run.plan.rounds} rounds, seed {run.plan.seed}, status {s.get('status', '?')}")
