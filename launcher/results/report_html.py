"""The report as one self-contained HTML page: viewable offline, from a mail attachment or a
CI artifact, with nothing fetched.

The page is the jinja2 template `templates/report.html`, autoescaped, filled with the same cell
grid the markdown table prints. Plots are inlined as data: URIs and the style sheet is inline;
there is no script. A Content Security Policy in the page forbids every load except data:
images and the inline style, so even a later edit cannot make the page reach out unnoticed.
"""

from __future__ import annotations

import base64
from typing import Any

import jinja2

from launcher.results.report import Report, Table
from launcher.results.report_plots import table_plots
from launcher.results.report_text import INTERVAL_NOTE, cell_grid, shown, skipped_text

POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("launcher.results", "templates"), autoescape=True,
    trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
ENVIRONMENT.filters["b64"] = lambda data: base64.b64encode(data).decode("ascii")


def section(table: Table) -> dict[str, Any]:
    return {"title": table.title, "grid": cell_grid(table), "plots": table_plots(table),
            "runs": [(row.group.label, [shown(run.path) for run in row.group.runs])
                     for row in table.rows]}


def to_html(report: Report) -> str:
    return ENVIRONMENT.get_template("report.html").render(
        policy=POLICY, note=INTERVAL_NOTE, skipped=skipped_text(report),
        runs=sum(len(row.group.runs) for t in report.tables for row in t.rows),
        sections=[section(t) for t in report.tables])
