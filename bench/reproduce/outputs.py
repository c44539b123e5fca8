"""What an experiment leaves behind: OUT/<experiment>.json (every number), .md (the table, the
paper's numbers, the verdicts, the inconsistencies it shows) and .png (its figure).

Means over seeds with 95% t-intervals (bench.seedstats), as the papers report theirs.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure as MplFigure

from bench.reproduce.deviations import Row
from bench.reproduce.experiment import Judged, Recipe, Results, fmt_ci, matches, parse_method
from bench.reproduce.paperdata import Experiment, Paper, PaperNumber
from bench.reproduce.provenance import checkout_commit, run_commits
from bench.seedstats import mean_ci


def stats(values: list[float]) -> dict[str, Any]:
    mean, half = mean_ci(values) if values else (math.nan, math.nan)
    return {"values": values, "mean": None if math.isnan(mean) else mean,
            "ci95": None if math.isnan(half) else half}


# The paper's words for a metric -> (our key, the factor from ours to the paper's unit).
OURS: dict[str, tuple[str, float]] = {
    "average accuracy": ("avg_accuracy", 1), "worst-client accuracy": ("worst_accuracy", 1),
    "bottom-10% accuracy": ("bottom10_accuracy", 1),
    "accuracy std across clients": ("std_accuracy", 1), "Jain's index": ("jain_index", 1),
    "bits per client": ("bits_per_client", 1e-6), "final accuracy": ("avg_accuracy", 100),
    "number of clusters chosen by Algorithm 1 (S*)": ("s_star", 1),
    "delta_all": ("delta_all", 1), "delta_seg": ("delta_seg", 1), "delta_sn": ("delta_sn", 1),
    "delta_dep": ("delta_dep", 1), "Seg mIoU": ("task:seg:miou", 1),
    "Seg PAcc": ("task:seg:pacc", 1),
    "Sn mean angular error (lower is better)": ("task:sn:mean", 1),
    "Sn median angular error (lower is better)": ("task:sn:median", 1),
    "Sn within 11.25 deg": ("task:sn:a11", 1), "Sn within 22.5 deg": ("task:sn:a22", 1),
    "Sn within 30 deg": ("task:sn:a30", 1),
    "Dep Abs error (lower is better)": ("task:dep:abs", 1),
    "Dep Rel error (lower is better)": ("task:dep:rel", 1),
    "Dep delta < 1.25": ("task:dep:d1", 1), "Dep delta < 1.25^2": ("task:dep:d2", 1),
    "Dep delta < 1.25^3": ("task:dep:d3", 1),
    "payload per client-to-neighbour exchange (ResNet-18 shared backbone)":
        ("bytes_per_exchange", 1e-6),
    "fairness-consensus bits per client per round": ("psi_bits", 1),
    "S at the minimum of the average effective gradient": ("s_argmin_H", 1),
}


def ours_for(number: PaperNumber, results: Results) -> str:
    """Our value beside one of the paper's numbers: its metric (`ours`, else by the paper's
    words) for its method and point, in the paper's unit, when exactly one arm is that (a
    fraction of ours against a paper's "%": times 100)."""
    key, factor = (number.ours, 100.0 if number.unit == "%" else 1.0) if number.ours \
        else OURS.get(number.metric, ("", 1.0))
    if not key:
        return ""
    name, point = parse_method(number.method)
    arms = [a for a in results if matches(a, name, point)]
    if len(arms) > 1:  # the arm whose every axis value the number's condition names
        words = set(re.findall(r"[a-z0-9][a-z0-9._-]*", number.condition.lower()))
        arms = [a for a in arms if all(named(v, words) for v in a.at.values())]
    if len(arms) != 1:
        return ""
    return fmt_ci([m.scalars[key] * factor for m in results[arms[0]] if key in m.scalars])


def named(value: object, words: set[str]) -> bool:
    text = str(value).lower()
    if text in words:
        return True
    try:
        return any(math.isclose(float(text), float(w)) for w in words
                   if re.fullmatch(r"[0-9.]+", w) and w.count(".") <= 1)
    except ValueError:
        return False


def to_json(paper: Paper, experiment: Experiment, budget: str, recipe: Recipe,
            results: Results, judged: list[Judged], findings: dict[int, str],
            deviations: list[Row]) -> dict[str, Any]:
    return {
        "paper": paper.id, "experiment": experiment.id, "label": experiment.label,
        "budget": budget, "seeds": list(recipe.seeds), "settings": dict(recipe.common),
        "notes": list(recipe.notes), "proxy": recipe.proxy, "commit": checkout_commit(),
        "run_commits": run_commits(m.run_dir for ms in results.values() for m in ms
                                   if m.run_dir is not None),
        "columns": list(recipe.columns), "figure": asdict(recipe.figure),
        "wall_seconds": wall_seconds(results),
        "rounds_cpu_seconds": rounds_cpu_seconds(results),
        "estimated_seconds": sum(recipe.cost.seconds(a.protocol, a.variant(recipe.common).settings)
                                 for a in recipe.arms) * len(recipe.seeds),
        "deviations": [asdict(r) for r in deviations],
        "arms": [{"method": a.method, "at": dict(a.at), "protocol": a.protocol,
                  "topology": a.topology, "settings": dict(a.settings),
                  "scalars": {k: stats([m.scalars[k] for m in ms if k in m.scalars])
                              for k in sorted({k for m in ms for k in m.scalars})},
                  "series": {axis: {metric: {str(x): [m.series.get(axis, {}).get(metric, {})
                                                      .get(x) for m in ms]
                                             for x in sorted({x for m in ms for x in m.series
                                                              .get(axis, {}).get(metric, {})})}
                                    for metric in sorted({k for m in ms
                                                          for k in m.series.get(axis, {})})}
                             for axis in sorted({a for m in ms for a in m.series})}}
                 for a, ms in results.items()],
        "paper_numbers": [{**n.model_dump(), "ours": ours_for(n, results)}
                          for n in experiment.numbers],
        "claims": [{"id": j.claim.id, "text": j.claim.text, "where": j.claim.where,
                    "verdict": str(j.verdict) if j.verdict else NOT_CHECKED,
                    "why_unchecked": j.claim.why_unchecked, "details": j.details}
                   for j in judged],
        "inconsistencies": [{"text": paper.inconsistencies[k].text, "measured": text}
                            for k, text in sorted(findings.items())],
    }


NOT_CHECKED = "not checked"


def runs_made_at(record: dict[str, Any]) -> str:
    """", its runs at commits ..." where the runs' stamps are not just the outputs' commit."""
    made = record.get("run_commits")
    if not made or made == [record["commit"]]:
        return ""
    return f", its runs at {', '.join(c[:12] for c in made)}"


def wall_seconds(results: Results) -> float:
    """What the experiment's runs took, each distinct run once (experiments share runs):
    the cost of running it from nothing on the machine that ran it."""
    seen: dict[str, float] = {}
    for ms in results.values():
        for m in ms:
            if (s := m.summary.get("wall_seconds")) is not None:
                seen[str(m.run_dir or id(m))] = float(s)
    return sum(seen.values())


def rounds_cpu_seconds(results: Results) -> float:
    """The CPU seconds every node of the experiment's runs spent in its rounds (evaluation
    and start-up aside): unlike wall time, what a run costs whatever else the machine ran."""
    seen: dict[str, float] = {}
    for ms in results.values():
        for m in ms:
            per_round = m.summary.get("round_cpu_seconds") or {}
            nodes = len(m.summary.get("nodes") or []) + len(m.summary.get("aggregators") or [])
            seen[str(m.run_dir or id(m))] = sum(per_round.values()) * nodes
    return sum(seen.values())


def to_markdown(record: dict[str, Any]) -> str:
    columns = tuple(record["columns"])
    lines = [f"## {record['label']} ({record['paper']}, {record['experiment']}), budget "
             f"{record['budget']}, seeds {record['seeds']}", ""]
    lines += [f"- {note}" for note in record["notes"]]
    if record.get("proxy"):
        lines.append(f"- a proxy: {record['proxy']}")
    lines.append(f"- wall time of its runs here: {record['wall_seconds'] / 60:.1f} min "
                 f"(estimated on an idle 2-core machine from the costs measured there: "
                 f"{record.get('estimated_seconds', 0) / 60:.1f} min; its nodes' CPU in rounds: "
                 f"{record.get('rounds_cpu_seconds', 0) / 60:.1f} min); made at commit "
                 f"{record['commit'][:12]}{runs_made_at(record)}")
    lines += ["", "| method | point | " + " | ".join(columns) + " |",
              "|---" * (len(columns) + 2) + "|"]
    for arm in record["arms"]:
        point = ", ".join(f"{k}={v}" for k, v in arm["at"].items()) or "-"
        cells = [fmt_ci(arm["scalars"].get(c, {}).get("values", [])) for c in columns]
        lines.append(f"| {arm['method']} | {point} | " + " | ".join(cells) + " |")
    lines += bar_rows(record, columns)
    if record["paper_numbers"]:
        lines += ["", "The paper's numbers:", "", "| method | metric | paper | condition | where "
                  "| ours |", "|---|---|---|---|---|---|"]
        for n in record["paper_numbers"]:
            value = f"{n['value']:g} {n['unit']}".strip()
            lines.append(f"| {n['method']} | {n['metric']} | {value} | {n['condition']} | "
                         f"{n['where']} | {n['ours'] or '-'} |")
    lines += ["", "Claims:", ""]
    for c in record["claims"]:
        lines.append(f"- **{c['verdict']}**: {c['text']} ({c['where']})")
        if c["verdict"] == NOT_CHECKED:
            lines.append(f"  - {c['why_unchecked']}")
        elif record.get("proxy"):
            lines.append(f"  - judged on a proxy: {record['proxy']}")
        lines += [f"  - {d}" for d in c["details"]]
    for inc in record["inconsistencies"]:
        lines += ["", f"Where the paper contradicts itself: {inc['text']}", "",
                  f"Measured here: {inc['measured']}"]
    return "\n".join(lines) + "\n"


def bar_rows(record: dict[str, Any], columns: tuple[str, ...]) -> list[str]:
    """The majority-class predictor's row under the table (one per distinct data split, when
    arms differ in it) and chance: what a model that learned nothing but its clients' label
    shares scores on each accuracy column."""
    rows: list[tuple[list[str], list[str]]] = []
    for arm in record["arms"]:
        cells = [fmt_ci(arm["scalars"].get(f"majority:{c}", {}).get("values", []))
                 if f"majority:{c}" in arm["scalars"] else "" for c in columns]
        if not any(cells):
            continue
        point = ", ".join(f"{k}={v}" for k, v in arm["at"].items()) or "-"
        # An arm evaluated on fewer splits (its own test split only) shares the bar of the
        # arms evaluated on both: one row, unless a column's bar differs.
        for row, points in rows:
            if all(not a or not b or a == b for a, b in zip(row, cells, strict=True)):
                row[:] = [a or b for a, b in zip(row, cells, strict=True)]
                points.append(point)
                break
        else:
            rows.append((cells, [point]))
    chance = {fmt_ci(a["scalars"]["chance"]["values"]) for a in record["arms"]
              if "chance" in a["scalars"]}
    out = []
    for cells, points in rows:
        where = "every arm" if len(rows) == 1 else ", ".join(sorted(set(points)))
        out.append(f"| *majority class* (chance {', '.join(sorted(chance))}) | {where} | "
                   + " | ".join(cells) + " |")
    return out


def draw(record: dict[str, Any], path: Path, marks: Sequence[PaperPoint] = ()) -> None:
    """The experiment's figure as the paper draws it: the same kind of plot and axes, a line
    or bar per method, means over seeds (bars and along: with 95% intervals), and the
    paper's own numbers marked where it gives them (`paper_points`)."""
    fig = MplFigure(figsize=(7.5, 4.5), dpi=110)
    ax = fig.subplots()
    spec = record["figure"]
    kind, metric, x_key, axis = spec["kind"], spec["metric"], spec["x"], spec["axis"]
    arms = record["arms"]
    if kind == "bars":
        labels = [a["method"] + "".join(f"\n{k}={v}" for k, v in a["at"].items()) for a in arms]
        means = [a["scalars"].get(metric, {}).get("mean") or 0.0 for a in arms]
        errs = [a["scalars"].get(metric, {}).get("ci95") or 0.0 for a in arms]
        ax.bar(range(len(arms)), means, yerr=errs, capsize=3, label="here")
        ax.set_xticks(range(len(arms)), labels, rotation=45, ha="right", fontsize=7)
        if metric.startswith("bits"):  # the variants span orders of magnitude, as the paper's
            ax.set_yscale("log")
        marked = [(i, p.y) for p in marks for i, a in enumerate(arms)
                  if a["method"] == p.method]
        if marked:
            ax.scatter([m[0] for m in marked], [m[1] for m in marked], marker="D",
                       color="black", zorder=3, label="paper")
    elif kind == "along":
        lines: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
        for a in arms:
            if x_key in a["at"]:
                rest = ", ".join(f"{k}={v}" for k, v in a["at"].items() if k != x_key)
                s = a["scalars"].get(metric, {})
                if s.get("mean") is not None:
                    lines[a["method"] + (f" ({rest})" if rest else "")].append(
                        (float(a["at"][x_key]), s["mean"], s.get("ci95") or 0.0))
        for label, pts in lines.items():
            pts.sort()
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts],
                        marker="o", capsize=3, label=label)
        ax.set_xlabel(x_key)
    else:
        for a in arms:
            series = a["series"].get(axis, {})
            ys = series.get(metric, {})
            xs: dict[str, list[float | None]] = series.get(x_key, {}) if x_key else {
                r: [float(r)] for r in ys}
            curve = sorted((mean(xs[r]), mean(v)) for r, v in ys.items() if r in xs)
            if x_key == "bits_per_client":  # a log axis has no 0: the untrained start goes
                curve = [c for c in curve if c[0] > 0]
            point = ", ".join(f"{k}={v}" for k, v in a["at"].items())
            ax.plot([p[0] for p in curve], [p[1] for p in curve], marker=".",
                    label=a["method"] + (f" ({point})" if point else ""))
        for p in marks:
            ax.scatter([p.x], [p.y], marker="D", color="black", zorder=3)
            ax.annotate(f"paper: {p.method}", (p.x, p.y), fontsize=6,
                        xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel(x_key or axis)
        if x_key == "bits_per_client":
            ax.set_xscale("log")
    for bar in sorted(majority_bars(record, metric)):
        ax.axhline(bar, color="grey", linestyle="--", linewidth=0.8,
                   label=f"majority class {bar:.3g}")
    ax.set_ylabel(metric)
    ax.set_title(f"{record['label']} ({record['paper']}), budget {record['budget']}",
                 fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path)


def majority_bars(record: dict[str, Any], metric: str) -> set[float]:
    """The majority-class share of each distinct data split, on the figure's accuracy axis:
    a curve under it has learned nothing but its clients' label shares."""
    key = "majority:" + ("avg_accuracy" if metric == "accuracy" else metric)
    return {round(a["scalars"][key]["mean"], 4) for a in record["arms"]
            if a["scalars"].get(key, {}).get("mean") is not None}


@dataclass(frozen=True)
class PaperPoint:
    """One of the paper's reported values placed on our figure: (x, y) in the figure's units,
    e.g. Table II's accuracy at its bits per client on the accuracy-versus-bits curve."""

    method: str
    x: float
    y: float


def paper_points(record: dict[str, Any], numbers: list[dict[str, Any]]) -> list[PaperPoint]:
    """The paper's numbers that belong on this record's figure: for bars, the figure's metric
    per method; for accuracy against bits, each method's final accuracy at its bits."""
    spec = record["figure"]
    by_method: dict[str, dict[str, float]] = defaultdict(dict)
    for n in numbers:
        key, factor = OURS.get(n["metric"], ("", 1.0))
        if key:
            by_method[n["method"]][key] = float(n["value"]) / factor
    methods = {a["method"] for a in record["arms"]}
    if spec["kind"] == "bars":
        return [PaperPoint(m, 0.0, v[spec["metric"]]) for m, v in by_method.items()
                if m in methods and spec["metric"] in v]
    if spec["kind"] == "curves" and spec["x"] == "bits_per_client" and \
            spec["metric"] == "accuracy":
        return [PaperPoint(m, v["bits_per_client"], v["avg_accuracy"])
                for m, v in by_method.items()
                if m in methods and {"bits_per_client", "avg_accuracy"} <= set(v)]
    return []


def mean(values: list[float | None]) -> float:
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else math.nan


def write(out: Path, record: dict[str, Any], marks_numbers: list[dict[str, Any]]) -> str:
    """OUT/<experiment>.json, .md and .png; `marks_numbers`: the paper's numbers that its
    figure marks (its own experiment's, or Figure.marks_from's)."""
    out.mkdir(parents=True, exist_ok=True)
    stem = out / record["experiment"]
    stem.with_suffix(".json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    text = to_markdown(record)
    stem.with_suffix(".md").write_text(text)
    draw(record, stem.with_suffix(".png"), paper_points(record, marks_numbers))
    return text
