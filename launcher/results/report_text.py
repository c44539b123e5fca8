"""The report as text: markdown tables for people, csv and json for other programs.

Markdown cells read `mean ± half-width`, the half-width being the 95% t-interval over seeds;
csv has one line per (group, metric) and json every seed's value too, with the run directories.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from launcher.results.report import Report, Row, Table
from launcher.results.report_columns import Column, Stat

INTERVAL_NOTE = ("mean ± 95% t-interval over seeds (t_{0.975, n-1} · s / √n, s with ddof 1); "
                 "(k/n): over the k of n seeds that reached the threshold; never: no seed "
                 "did; –: no value (no such threshold, no delta baseline)")
SI = ((1e9, "G"), (1e6, "M"), (1e3, "k"))
DECIMALS = {"fraction": 4, "percent": 2, "cycles": 1}


def shown(path: Path) -> str:
    """A run directory, relative to the working directory when below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def si_prefix(value: float) -> tuple[float, str]:
    return next(((f, s) for f, s in SI if abs(value) >= f), (1.0, ""))


def value_text(unit: str, value: float, prefix: tuple[float, str]) -> str:
    """Bits carry the mean's SI prefix, so mean and half-width read on one scale; a value
    that rounds to zero reads 0, never -0."""
    text = (f"{value / prefix[0]:.2f}{prefix[1]}" if unit == "bits"
            else f"{value:.{DECIMALS[unit]}f}")
    return text.removeprefix("-") if not text.strip("-0.kMG") else text


def cell_text(column: Column, cell: Stat) -> str:
    if cell.n == 0:
        return "never" if cell.total else "–"
    prefix = si_prefix(cell.mean)
    text = value_text(column.unit, cell.mean, prefix)
    if cell.n > 1:
        text += f" ± {value_text(column.unit, cell.half, prefix)}"
    return text if cell.n == cell.total else f"{text} ({cell.n}/{cell.total})"


def seeds_text(row: Row) -> str:
    return ", ".join(str(s) for s in row.group.seeds)


def markdown_table(table: Table) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    lines = [f"## {table.title}", "",
             line(["group", "seeds", *(c.header for c in table.columns)]),
             "| --- | --- |" + " ---: |" * len(table.columns)]
    lines += [line([row.group.label, seeds_text(row),
                    *(cell_text(c, row.cells[c.key]) for c in table.columns)])
              for row in table.rows]
    lines += [""]
    lines += [f"- {row.group.label}: " + ", ".join(shown(r.path) for r in row.group.runs)
              for row in table.rows]
    return "\n".join(lines)


def skipped_text(report: Report) -> list[str]:
    return [f"skipped (status {run.summary.get('status')}): {shown(run.path)}"
            for run in report.skipped]


def to_markdown(report: Report) -> str:
    parts = [*(markdown_table(t) for t in report.tables), INTERVAL_NOTE]
    if report.skipped:
        parts.append("\n".join(f"- {line}" for line in skipped_text(report)))
    return "\n\n".join(parts) + "\n"


def finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


CSV_HEADER = ["family", "eval_split", "group", "protocol", "seeds", "metric", "header", "mean",
              "ci95", "n", "total"]


def to_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for table in report.tables:
        for row in table.rows:
            for column in table.columns:
                cell = row.cells[column.key]
                writer.writerow([table.family, table.eval_split, row.group.label,
                                 row.group.protocol, " ".join(map(str, row.group.seeds)),
                                 column.key, column.header, finite(cell.mean),
                                 finite(cell.half), cell.n, cell.total])
    return out.getvalue()


def cell_json(cell: Stat) -> dict[str, Any]:
    return {"mean": finite(cell.mean), "ci95": finite(cell.half), "n": cell.n,
            "total": cell.total,
            "values": {str(s): None if v is None else finite(v) for s, v in cell.values.items()}}


def table_json(table: Table) -> dict[str, Any]:
    return {"family": table.family, "eval_split": table.eval_split, "title": table.title,
            "columns": [{"key": c.key, "header": c.header, "unit": c.unit}
                        for c in table.columns],
            "groups": [{"label": row.group.label, "protocol": row.group.protocol,
                        "seeds": row.group.seeds,
                        "runs": [shown(r.path) for r in row.group.runs],
                        "cells": {k: cell_json(c) for k, c in row.cells.items()}}
                       for row in table.rows]}


def to_json(report: Report) -> str:
    data = {"interval": "95% Student-t over seeds",
            "tables": [table_json(t) for t in report.tables],
            "skipped": [shown(run.path) for run in report.skipped]}
    return json.dumps(data, indent=1) + "\n"


RENDERERS = {"markdown": to_markdown, "csv": to_csv, "json": to_json}
