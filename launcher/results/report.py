"""`dfl-report`'s content: run directories in, one table per paper family and eval split out.

The families, their titles and columns are the protocols' declarations, read through the
registry.

Every renderer (markdown, csv, json, html) and the overlay plots read this one structure, so
they cannot disagree about a number. Runs that did not finish (`status` other than ok) are left
out of the statistics and listed as skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from launcher.errors import LaunchError
from launcher.results.report_columns import Column, Stat, columns_for, stat
from launcher.results.report_groups import Group, table_groups
from launcher.results.report_runs import Run, load_runs
from protocols.registry import ReportFamily, report_families


@dataclass(frozen=True)
class Row:
    group: Group
    cells: dict[str, Stat]


@dataclass(frozen=True)
class Table:
    family: str
    eval_split: str
    columns: list[Column]
    rows: list[Row]

    @property
    def described(self) -> ReportFamily:
        return report_families()[self.family]

    @property
    def title(self) -> str:
        return f"{self.described.table.title}, eval split {self.eval_split}"

    @property
    def slug(self) -> str:
        return f"{self.family}-{self.eval_split}"


@dataclass(frozen=True)
class Report:
    tables: list[Table]
    skipped: list[Run]


def finished(run: Run) -> bool:
    return run.summary.get("status", "ok") == "ok"


def build_report(paths: list[Path]) -> Report:
    return report_of(load_runs(paths))


def report_of(runs: list[Run]) -> Report:
    done = [run for run in runs if finished(run)]
    if not done:
        raise LaunchError(f"none of the {len(runs)} runs found finished (summary.json status ok)")
    tables = []
    for tg in table_groups(done):
        columns = columns_for(tg.family, [run for g in tg.groups for run in g.runs])
        rows = [Row(g, {c.key: stat(c, g.runs) for c in columns}) for g in tg.groups]
        tables.append(Table(tg.family, tg.eval_split, columns, rows))
    return Report(tables, [run for run in runs if not finished(run)])
