"""Run a sweep's unfinished runs under one progress bar; then its report.

A run whose directory holds an ok summary is done and skipped; one with a plan and recorded
inputs was interrupted (or failed) and is resumed from its checkpoints; any other starts fresh.
A directory that was launched with other inputs than the sweep now asks for is not touched:
that is bad input, since rerunning it would lose a finished run. The same decisions send a
sweep's runs to Slurm instead (launcher/slurm/sweep.py); a run resumes where it started, on this
machine or as a Slurm job.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dfl_node.plan import RunPlan
from launcher.api.result import RunResult, frame
from launcher.config.options import ViewOptions
from launcher.errors import LaunchError
from launcher.launch import launch_one
from launcher.run.claim import finished, same_inputs
from launcher.run.finish import EXIT_INTERRUPTED, EXIT_OK, stopped
from launcher.run.progress import Display, RoundTable, emit
from launcher.run.resume import recorded_inputs, slurm_inputs
from launcher.run.watched import interactive
from launcher.sweep.grid import CheckedSweep, Point, checked
from launcher.sweep.spec import SweepSpec

if TYPE_CHECKING:
    import pandas as pd

REPORT_FILE = "report.md"


def resumable(run_dir: Path) -> bool:
    return (run_dir / "plan.json").is_file() and recorded_inputs(run_dir) is not None


def check_owned(point: Point) -> None:
    """The directory is this run's (or empty): never overwrite a run of another experiment.
    Only what the run was asked is compared: a run on Slurm records beside it what its job
    asked Slurm for (launcher/slurm/submit.py), which changes nothing it computes."""
    recorded = recorded_inputs(point.run_dir)
    if recorded is not None and not same_inputs(recorded, point.request):
        raise LaunchError(f"{point.run_dir}: holds a run with other inputs than the sweep "
                          "gives it now (the sweep file changed?); move it away or give the "
                          "sweep another `out`")


def check_resumable_here(point: Point) -> None:
    """A run interrupted as a Slurm job goes on as one (launcher/slurm/sweep.py): its plan
    discovers its hosts where a local plan names them, and a node refuses a checkpoint of
    another plan, so resuming it here would only be refused as changed inputs."""
    if resumable(point.run_dir) and slurm_inputs(point.run_dir) is not None:
        raise LaunchError(f"{point.run_dir}: a run interrupted on Slurm; finish it there (a run "
                          "resumes where it started), or move it away")


def meshes_at_once(spec: SweepSpec, largest_mesh: int) -> int:
    """`parallel: auto`: a mesh per as many cores as it has nodes (one at a time on 2 cores)."""
    if spec.parallel != "auto":
        return spec.parallel
    return max(1, (os.cpu_count() or 1) // max(1, largest_mesh))


class SweepBar:
    """One bar for the whole sweep: finished runs plus the share of rounds of those running."""

    def __init__(self, total: int, done: int, shown: bool) -> None:
        self.total, self.done = total, done
        self.progress: Any = None
        if shown:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(),
                                     TextColumn("ETA"), TimeRemainingColumn())
            self.task = self.progress.add_task("sweep", total=total, completed=done)
            self.progress.start()

    def update(self, label: str, fraction: float = 0.0) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=self.done + fraction,
                                 description=label)

    def run_ended(self) -> None:
        self.done += 1
        self.update("sweep")

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


class RunShown(Display):
    """One run of the sweep: its rounds move the sweep's bar; its last line is printed."""

    def __init__(self, bar: SweepBar, label: str) -> None:
        super().__init__(pipe=False)
        self.bar, self.label = bar, label
        self.table = RoundTable(1, 0.0)
        self.rounds = 1

    def stage(self, text: str) -> None:
        self.bar.update(f"{self.label}: {text}")

    def start(self, plan: RunPlan) -> None:
        self.table = RoundTable(len(plan.clients), 0.0)
        self.rounds = max(1, plan.rounds)

    def on_record(self, kind: str, record: dict[str, Any]) -> None:
        if kind == "metrics":
            self.table.add(record, 0)
            self.bar.update(f"{self.label}: training",
                            min(1.0, self.table.complete() / self.rounds))


@dataclass
class SweepResult:
    """The sweep's runs (all of them, in grid order) and its report."""

    out: Path
    points: list[Point]
    skipped: int
    report: str = ""
    interrupted: bool = False

    @property
    def runs(self) -> list[RunResult]:
        return [RunResult(p.run_dir) for p in self.points if (p.run_dir / "summary.json").exists()]

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return EXIT_OK if all(finished(p.run_dir) for p in self.points) else 1

    @property
    def table(self) -> pd.DataFrame:
        """One row per run: what varied, then how it ended."""
        rows = []
        for p in self.points:
            s = RunResult(p.run_dir).raw if (p.run_dir / "summary.json").exists() else {}
            rows.append({"variant": p.variant.name, "protocol": p.variant.protocol,
                         "topology": Path(p.topology).stem, **p.values, "seed": p.seed,
                         "status": s.get("status", "not run"),
                         "avg_accuracy": s.get("avg_accuracy"),
                         "worst_accuracy": s.get("worst_accuracy"),
                         "bits_per_client": s.get("bits_per_client"),
                         "run_dir": str(p.run_dir)})
        return frame(rows)


def run_point(point: Point, display: Display | None, plots: bool) -> int:
    check_owned(point)
    return launch_one(point.request, point.run_dir, ViewOptions(quiet=True, plots=plots),
                      resuming=resumable(point.run_dir), display=display)


def run_in_worker(point: Point, plots: bool) -> int:
    """A run in a pool worker (`parallel` > 1): its own process, its last line its own."""
    return run_point(point, None, plots)


def run_sweep(sweep: SweepSpec | CheckedSweep, progress: bool = True, plots: bool = True,
              on_report: Callable[[str], None] = emit) -> SweepResult:
    sweep = sweep if isinstance(sweep, CheckedSweep) else checked(sweep)
    spec, grid = sweep.spec, sweep.points
    assert spec.out is not None
    for point in grid:
        check_owned(point)
    todo = [p for p in grid if not finished(p.run_dir)]
    for point in todo:
        check_resumable_here(point)
    result = SweepResult(spec.out, grid, skipped=len(grid) - len(todo))
    at_once = meshes_at_once(spec, sweep.largest)
    bar = SweepBar(len(grid), result.skipped, progress and interactive())
    try:
        if at_once <= 1:
            for point in todo:
                code = run_point(point, RunShown(bar, point.label), plots)
                bar.run_ended()
                if stopped(code):
                    result.interrupted = True
                    break
        else:
            run_parallel(todo, at_once, plots, bar, result)
    except KeyboardInterrupt:
        result.interrupted = True
    finally:
        bar.close()
    report_sweep(result, on_report)
    return result


def report_sweep(result: SweepResult, on_report: Callable[[str], None]) -> None:
    """OUT/report.md over the sweep's finished runs, once any has finished. The report's
    statistics import scipy (about 1 CPU-s), here and not at the top: a sweep refused for bad
    input, and `import dfl_mesh`, need none of it."""
    if any(finished(p.run_dir) for p in result.points):
        from launcher.results.report import build_report
        from launcher.results.report_text import to_markdown

        result.report = to_markdown(build_report([result.out]))
        (result.out / REPORT_FILE).write_text(result.report)
        on_report(result.report.rstrip("\n"))


def run_parallel(todo: list[Point], at_once: int, plots: bool, bar: SweepBar,
                 result: SweepResult) -> None:
    # The worker pool's modules, for a grid that holds: not before its checks (issue 45).
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    with ProcessPoolExecutor(at_once, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_in_worker, p, plots) for p in todo]
        for future in futures:
            bar.run_ended()
            result.interrupted |= future.result() == EXIT_INTERRUPTED
