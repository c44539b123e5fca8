"""What `dfl-launch` shows on stdout while a run goes, chosen once by whether stdout is a terminal.

On a terminal: a bar over rounds with an ETA, the set-up step under way (data, nodes starting,
pre-phase) and a compact table of the latest evaluations, drawn with rich. The drawing is
transient, so a run that stops at bad input leaves nothing on the screen but its error; the
final table is printed once the run ends. Into a pipe or file: every evaluation as exactly the
JSON line `metrics.jsonl` gets, so a script can follow a run live. A pipe never gets the bar, and
errors never go to stdout. Everywhere, `--quiet` included, the run ends with one line: the run
directory, then the average and worst accuracy, or the failure and its node.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from dfl_node.plan import RunPlan
from dfl_node.runner.records import MetricsRecord
from launcher.run.outcome import Outcome
from launcher.run.watched import in_notebook
from protocols.registry import protocol_spec

TABLE_ROWS = 8
REFRESH_PER_S = 4


class Display:
    """Quiet: nothing while the run goes; the last line only."""

    def __init__(self, pipe: bool) -> None:
        self.pipe = pipe

    def __enter__(self) -> Display:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def stage(self, text: str) -> None:
        """A set-up step begins (data preparation, starting nodes, ...)."""

    def start(self, plan: RunPlan) -> None:
        """The plan is known: how many rounds and clients there are to follow."""

    def on_record(self, kind: str, record: dict[str, Any]) -> None:
        """A validated record from the collector (`ready`, `metrics`, `done`, `error`)."""

    def close(self) -> None:
        """The run is over: stop drawing (idempotent)."""

    def final(self, run_dir: Path, outcome: Outcome, summary: dict[str, Any]) -> None:
        emit(last_line(run_dir, outcome, summary))


def last_line(run_dir: Path, outcome: Outcome, summary: dict[str, Any]) -> str:
    """The one line every run ends with, whatever stdout is: it starts `run_dir: RUN_DIR`, so a
    script that takes the directory from that prefix keeps working, then how the run ended."""
    head = f"run_dir: {run_dir}"
    if outcome.ok:
        return (f"{head}  avg_accuracy={fmt(summary.get('avg_accuracy'), '.4f')}  "
                f"worst_accuracy={fmt(summary.get('worst_accuracy'), '.4f')}")
    if outcome.status == "interrupted":
        return f"{head}  {outcome.cause.message if outcome.cause else 'interrupted'}"
    if outcome.cause is not None:
        return f"{head}  failed: {outcome.cause.message}"
    node = "the mesh" if outcome.failed_node is None else f"node {outcome.failed_node}"
    return f"{head}  failed: {node} ({outcome.reason or 'no reason given'})"


class JsonLines(Display):
    """Each evaluation as its metrics.jsonl line, flushed, for a program reading the pipe.

    A writer thread does the writing: a reader that lags (or never reads) must not stall the
    collector, which also watches the nodes for failures.
    """

    def __init__(self) -> None:
        super().__init__(pipe=True)
        self.lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self.writer = threading.Thread(target=self._write, name="json-lines", daemon=True)
        self.writer.start()

    def on_record(self, kind: str, record: dict[str, Any]) -> None:
        if kind == "metrics":
            self.lines.put(json.dumps(record, sort_keys=True))

    def _write(self) -> None:
        while (line := self.lines.get()) is not None:
            emit(line)

    def close(self) -> None:
        if self.writer.is_alive():
            self.lines.put(None)
            self.writer.join()


def emit(line: str) -> None:
    """One line on stdout; a reader that went away (`| head`) must not end the run."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class RoundTable:
    """Per-round aggregates of the evaluations that have arrived, for the live table."""

    def __init__(self, clients: int, started: float, bits_metric: str | None = None) -> None:
        self.clients = clients
        self.bits_metric = bits_metric
        self.started = started
        self.records: dict[int, list[MetricsRecord]] = defaultdict(list)
        self.wall: dict[int, float] = {}
        self.alive: dict[int, int] = {}

    def add(self, record: dict[str, Any], alive: int) -> None:
        metrics = MetricsRecord.model_validate(record)
        r = metrics.round
        self.records[r].append(metrics)
        self.wall[r] = time.monotonic() - self.started
        self.alive[r] = alive

    def complete(self) -> int:
        """The last round every client has reported (rounds are evaluated in order)."""
        done = [r for r, recs in self.records.items() if len(recs) >= self.clients]
        return max(done, default=0)

    def row(self, r: int) -> list[str]:
        recs = self.records[r]
        acc = [x.accuracy for x in recs if x.accuracy is not None]
        loss = [x.loss for x in recs if x.loss is not None]
        bits = [] if self.bits_metric is None else [
            float(b) for x in recs if (b := x.extra(self.bits_metric)) is not None]
        return [str(r), fmt(mean(acc), ".4f"), fmt(min(acc, default=None), ".4f"),
                fmt(mean(loss), ".4f"), fmt(mean(bits), ".3g"),
                human_bytes(sum(x.wire_bytes for x in recs)),
                fmt(max((float(x.virtual_seconds) for x in recs), default=None), ".2f"),
                f"{self.wall[r]:.1f}", f"{len(recs)}/{self.clients}", str(self.alive[r])]

    def latest(self, count: int = TABLE_ROWS) -> list[list[str]]:
        return [self.row(r) for r in sorted(self.records)[-count:]]


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


class Live(Display):
    """The terminal view: a bar with ETA, the current step, the last rounds as a table."""

    HEADERS = ("round", "{m} avg", "{m} worst", "loss", "bits/client", "wire bytes",
               "virtual s", "wall s", "reported", "alive")

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.live import Live as RichLive
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        super().__init__(pipe=False)
        self.console = Console(file=stream)
        self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                            TimeRemainingColumn(), console=self.console)
        self.task = self.bar.add_task("resolving the plan", total=None)
        self.started = time.monotonic()
        self.table = RoundTable(1, self.started)
        self.metric = "acc"
        self.nodes = 0
        self.ready: set[int] = set()
        self.failed: set[int] = set()
        self.prephase = False
        self.live = RichLive(self.bar, console=self.console, refresh_per_second=REFRESH_PER_S,
                             transient=True)
        self.live.start()
        self.drawing = True

    def stage(self, text: str) -> None:
        self.bar.update(self.task, description=text)

    def start(self, plan: RunPlan) -> None:
        declared = protocol_spec(plan.protocol)
        self.table = RoundTable(len(plan.clients), self.started, declared.bits_metric)
        self.metric = declared.score.short
        self.nodes = len(plan.ids)
        self.prephase = bool(plan.prephase)
        self.bar.update(self.task, total=plan.rounds, completed=0)

    def on_record(self, kind: str, record: dict[str, Any]) -> None:
        node = record["node"]
        if kind == "ready":
            self.ready.add(node)
            self.stage(self._starting())
        elif kind == "error":
            self.failed.add(node)
        elif kind == "metrics":
            self.table.add(record, len(self.ready - self.failed))
            self.bar.update(self.task, completed=self.table.complete(), description="training")
        self.live.update(self._view())

    def _starting(self) -> str:
        if len(self.ready) < self.nodes:
            return f"starting nodes: {len(self.ready)}/{self.nodes} ready"
        return "pre-phase" if self.prephase else "first round"

    def _render_table(self) -> Any:
        from rich.table import Table

        table = Table(box=None, pad_edge=False)
        for header in self.HEADERS:
            table.add_column(header.format(m=self.metric), justify="right")
        for row in self.table.latest():
            table.add_row(*row)
        return table

    def _view(self) -> Any:
        from rich.console import Group

        return Group(self.bar, self._render_table()) if self.table.records else self.bar

    def close(self) -> None:
        if not self.drawing:
            return
        self.drawing = False
        self.live.stop()
        if self.table.records:
            self.console.print(self._render_table())


def open_display(quiet: bool, stream: TextIO | None = None) -> Display:
    """The live view on a terminal, JSON lines into a pipe, `--quiet` neither."""
    stream = stream or sys.stdout
    pipe = not (stream.isatty() or in_notebook())
    if quiet:
        return Display(pipe)
    return JsonLines() if pipe else Live(stream)
