"""Figures of the network: the graph with each node's final score, and the bytes on each link.

The graph shows what shaped the run besides the data: where nodes sit, which cluster each
joined (protocols whose pre-phase forms clusters), which TDMA slot each link sends in (each
half of an edge coloured by the slot of the node it starts from).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import BoundaryNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from launcher.results.plots_curves import (
    ADVERSARY_COLOUR,
    ADVERSARY_MARKER,
    DPI,
    adversaries_label,
    run_title,
    score_label,
)
from launcher.results.plots_data import (
    RunFiles,
    clusters,
    final_scores,
    link_bytes,
    positions,
    slots,
)

Point = tuple[float, float]
LABELLED_NODES = 40


def layout(run: RunFiles) -> tuple[dict[int, Point], str]:
    """The topology's positions, else a seeded spring layout; and the axis unit."""
    given = positions(run)
    if given is not None:
        return given, "position units"
    graph = nx.Graph(run.plan.edges())
    graph.add_nodes_from(run.plan.ids)
    spring = nx.spring_layout(graph, seed=0)
    return {int(n): (float(p[0]), float(p[1])) for n, p in spring.items()}, "layout units"


def draw_slots(ax: Axes, fig: Figure, where: dict[int, Point],
               slot_of: dict[tuple[int, int], int]) -> Line2D:
    """Each directed link as the half edge from its sender, coloured by the sender's slot."""
    frame = max(slot_of.values()) + 1
    cmap = colormaps["turbo"].resampled(frame)
    norm = BoundaryNorm(np.arange(frame + 1) - 0.5, frame)
    for (a, b), slot in sorted(slot_of.items()):
        (xa, ya), (xb, yb) = where[a], where[b]
        ax.plot([xa, (xa + xb) / 2], [ya, (ya + yb) / 2], color=cmap(norm(slot)), linewidth=2.5,
                zorder=1)
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, fraction=0.04, pad=0.01)
    bar.set_ticks(range(0, frame, max(1, frame // 10)))
    bar.set_label("TDMA slot of the half edge's sender (index)")
    return Line2D([], [], color="grey", linewidth=2.5,
                  label=f"link half: its sender's slot ({frame} slots)")


def draw_edges(ax: Axes, where: dict[int, Point], edges: list[tuple[int, int]],
               cluster_of: dict[int, int], colours: dict[int, tuple]) -> list[Line2D]:
    """Edges inside a cluster in its colour, every other edge grey and dashed."""
    for a, b in edges:
        same = cluster_of and cluster_of.get(a) == cluster_of.get(b)
        (xa, ya), (xb, yb) = where[a], where[b]
        ax.plot([xa, xb], [ya, yb], zorder=1,
                color=colours[cluster_of[a]] if same else "grey",
                linestyle="-" if same or not cluster_of else "--",
                linewidth=2.0 if same else 1.0, alpha=1.0 if same or not cluster_of else 0.5)
    if not cluster_of:
        return [Line2D([], [], color="grey", label="link")]
    return [Line2D([], [], color="grey", linestyle="--", label="link between clusters")]


def cluster_handles(cluster_of: dict[int, int], colours: dict[int, tuple]) -> list[Line2D]:
    sizes = {c: sum(1 for v in cluster_of.values() if v == c) for c in colours}
    return [Line2D([], [], marker="o", linestyle="-", color=colours[c], markerfacecolor="white",
                   markeredgewidth=2.5, label=f"cluster {c} ({sizes[c]} nodes)")
            for c in sorted(colours)]


def topology_figure(run: RunFiles) -> Figure:
    """The graph: node colour is the final score; cluster rings and slot colours when present;
    adversaries as crosses of their own colour (the score's scale is the honest nodes')."""
    where, unit = layout(run)
    scores = final_scores(run)
    cluster_of, slot_of = clusters(run), slots(run)
    colours = {c: colormaps["tab10"](k % 10) for k, c in
               enumerate(sorted(set(cluster_of.values())))}
    fig = Figure(figsize=(10.0, 8.0), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    handles = (
        [draw_slots(ax, fig, where, slot_of)] if slot_of
        else draw_edges(ax, where, run.plan.edges(), cluster_of, colours))
    attackers = run.adversaries
    ids = [n for n in run.plan.ids if n not in attackers]
    metric = score_label(run)
    values = [scores.get(n, np.nan) for n in ids]
    norm = Normalize(*_score_range(values))
    nodes = ax.scatter([where[n][0] for n in ids], [where[n][1] for n in ids], c=values,
                       cmap="viridis", norm=norm, s=260, zorder=2, plotnonfinite=True,
                       edgecolors=[colours[cluster_of[n]] if n in cluster_of else "black"
                                   for n in ids],
                       linewidths=3.0 if cluster_of else 1.0,
                       label=f"{'honest ' if attackers else ''}node "
                             f"(fill: final {metric.split(' (')[0]})")
    fig.colorbar(nodes, ax=ax, fraction=0.04, pad=0.01).set_label(f"final {metric}")
    shown = [nodes, *handles, *cluster_handles(cluster_of, colours)]
    if attackers:
        shown.append(ax.scatter([where[n][0] for n in attackers],
                                [where[n][1] for n in attackers], color=ADVERSARY_COLOUR,
                                marker=ADVERSARY_MARKER, s=420, zorder=2, edgecolors="black",
                                linewidths=1.0, label=adversaries_label(run)))
    if len(run.plan.ids) <= LABELLED_NODES:
        for n in ids:
            ax.annotate(str(n), where[n], ha="center", va="center", fontsize=7, zorder=3,
                        color="white" if norm(scores.get(n, 0.0)) < 0.5 else "black")
        for n in attackers:
            ax.annotate(str(n), where[n], ha="center", va="center", fontsize=7, zorder=3,
                        color="black")
    ax.legend(handles=shown, loc="best", fontsize="small")
    ax.set(title=f"Topology {run.plan.topology_name}: {len(run.plan.ids)} nodes, "
                 f"{len(run.plan.edges())} edges", xlabel=f"x ({unit})", ylabel=f"y ({unit})")
    ax.set_aspect("equal", adjustable="datalim")
    fig.suptitle(run_title(run))
    return fig


def link_bytes_figure(run: RunFiles) -> Figure | None:
    """Data bytes per directed link, sender by receiver; None before any node reported."""
    matrix = link_bytes(run)
    if not matrix.any():
        return None
    ids = run.plan.ids
    fig = Figure(figsize=(9.0, 7.5), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    shown = np.ma.masked_equal(matrix, 0.0)
    image = ax.imshow(shown, cmap="magma_r", interpolation="nearest", vmin=0.0)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.02).set_label(
        "data bytes sent, payload + framing (B)")
    if len(ids) <= LABELLED_NODES:
        ax.set_xticks(range(len(ids)), [str(n) for n in ids], fontsize=7)
        ax.set_yticks(range(len(ids)), [str(n) for n in ids], fontsize=7)
    ax.set(title=f"Bytes per link: {matrix.sum() / 1e6:.3f} MB on {int((matrix > 0).sum())} "
                 "directed links", xlabel="receiver (node id)", ylabel="sender (node id)")
    fig.suptitle(run_title(run))
    return fig


def _score_range(values: list[float]) -> tuple[float, float]:
    finite = [v for v in values if np.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    return (lo, hi) if hi > lo else (lo - 0.05, hi + 0.05)
