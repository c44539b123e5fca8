"""The report as one self-contained HTML page: viewable offline, from a mail attachment or a
CI artifact, with nothing fetched.

Plots are inlined as data: URIs and the style sheet is inline; there is no script. A Content
Security Policy in the page forbids every load except data: images and the inline style, so
even a later edit cannot make the page reach out unnoticed.
"""

from __future__ import annotations

import base64
from html import escape

from launcher.results.report import Report, Table
from launcher.results.report_plots import table_plots
from launcher.results.report_text import INTERVAL_NOTE, cell_text, seeds_text, shown, skipped_text

POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2.2em; }
table { border-collapse: collapse; margin: 0.8em 0; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.7em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f4f4f4; }
td { font-variant-numeric: tabular-nums; white-space: nowrap; }
td:first-child { white-space: normal; }
.note { color: #555; font-size: 0.9em; }
figure { margin: 1em 0; } img { max-width: 100%; }
figcaption { color: #555; font-size: 0.9em; }
code { font-size: 0.9em; }
"""


def html_table(table: Table) -> str:
    head = "".join(f"<th>{escape(h)}</th>"
                   for h in ("group", "seeds", *(c.header for c in table.columns)))
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape(text)}</td>" for text in (
            row.group.label, seeds_text(row),
            *(cell_text(c, row.cells[c.key]) for c in table.columns))) + "</tr>"
        for row in table.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def figures(table: Table) -> str:
    return "".join(
        f'<figure><img alt="{escape(plot.title)}" src="data:image/png;base64,'
        f'{base64.b64encode(plot.png).decode("ascii")}"><figcaption>{escape(plot.title)}; '
        "line: mean over seeds, band: lowest to highest seed</figcaption></figure>"
        for plot in table_plots(table))


def run_list(table: Table) -> str:
    items = "".join(
        f"<li>{escape(row.group.label)}: "
        + ", ".join(f"<code>{escape(shown(run.path))}</code>" for run in row.group.runs)
        + "</li>" for row in table.rows)
    return f"<details><summary>run directories</summary><ul>{items}</ul></details>"


def section(table: Table) -> str:
    return (f"<section><h2>{escape(table.title)}</h2>{html_table(table)}"
            f"{run_list(table)}{figures(table)}"
            "</section>")


def to_html(report: Report) -> str:
    runs = sum(len(row.group.runs) for t in report.tables for row in t.rows)
    skipped = "".join(f"<li>{escape(line)}</li>" for line in skipped_text(report))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>dfl-report</title><style>{STYLE}</style></head><body>"
        f"<h1>dfl-report</h1><p>{runs} runs in {len(report.tables)} tables.</p>"
        f'<p class="note">{escape(INTERVAL_NOTE)}</p>'
        + "".join(section(t) for t in report.tables)
        + (f"<h2>Skipped</h2><ul>{skipped}</ul>" if skipped else "")
        + "</body></html>\n")
