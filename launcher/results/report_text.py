"""The report as text: markdown tables for people, csv and json for other programs.

Markdown cells read `mean ± half-width`, the half-width being the 95% t-interval over seeds;
csv has one line per (group, metric) and json every seed's value too, with the run directories.

pandas holds the tables: the grid of cell texts (markdown here, the HTML page in report_html.py)
and the long csv table. The markdown keeps its compact pipe layout rather than pandas'
`to_markdown`, which pads every column to its widest cell; json stays the standard library's,
since it is a nested document (per-seed values, run lists), not a table, and pandas would
round its floats.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from launcher.results.report import Report, Row, Table
from launcher.results.report_columns import Column, Stat

INTERVAL_NOTE = ("mean ± 95% t-interval over seeds (t_{0.975, n-1} · s / √n, s with ddof 1); "
                 "(k/n): over the k of n seeds that reached the threshold; never: no seed "
                 "did; –: no value (no such threshold, no delta baseline, no backdoor)")
SI = ((1e9, "G"), (1e6, "M"), (1e3, "k"))
DECIMALS = {"fraction": 4, "percent": 2, "cycles": 1, "norm": 4}


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


def cell_grid(table: Table) -> pd.DataFrame:
    """The table as people read it, one string per cell: markdown and the HTML page both render
    this one grid, so they cannot show different text."""
    return pd.DataFrame(
        [[row.group.label, seeds_text(row),
          *(cell_text(c, row.cells[c.key]) for c in table.columns)] for row in table.rows],
        columns=["group", "seeds", *(c.header for c in table.columns)], dtype=str)


def markdown_table(table: Table) -> str:
    grid = cell_grid(table)
    escaped = grid.apply(lambda column: column.str.replace("|", "\\|", regex=False))
    header = "| " + " | ".join(h.replace("|", "\\|") for h in grid.columns) + " |"
    rows = ("| " + escaped.agg(" | ".join, axis=1) + " |").tolist() if len(grid) else []
    lines = [f"## {table.title}", "", header,
             "| --- | --- |" + " ---: |" * len(table.columns), *rows, ""]
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


def csv_rows(report: Report) -> Iterator[list[Any]]:
    for table in report.tables:
        for row in table.rows:
            for column in table.columns:
                cell = row.cells[column.key]
                yield [table.family, table.eval_split, row.group.label, row.group.protocol,
                       " ".join(map(str, row.group.seeds)), column.key, column.header,
                       finite(cell.mean), finite(cell.half), cell.n, cell.total]


def to_csv(report: Report) -> str:
    """One line per (group, metric); a missing or infinite value is an empty field."""
    frame = pd.DataFrame(list(csv_rows(report)), columns=CSV_HEADER)
    frame = frame.astype({"mean": float, "ci95": float, "n": int, "total": int})
    return frame.to_csv(index=False, lineterminator="\n")


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
