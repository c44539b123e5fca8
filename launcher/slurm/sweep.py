"""A sweep's runs as Slurm jobs: each run one job, queued and followed from this host as
`dfl-launch slurm --submit` queues and follows one (launcher/slurm/queue.py,
launcher/slurm/submit.py), so that a grid of meshes (a paper's reproduction, `python -m
bench.reproduce --backend slurm`) runs on a cluster.

Which runs go is decided as the local runner decides it (launcher/sweep/runner.py): a run whose
directory holds an ok summary is skipped; one that was interrupted or failed (its job cancelled
or out of time, a node killed) is resumed in its directory from its checkpoints, as a job of its
own; any other is queued fresh. So the same command again finishes only what is left. A run
interrupted on this machine cannot go on as a Slurm job, nor the reverse: a discovery plan names
no hosts, a local plan does, and a node refuses a checkpoint of another plan. Such a directory is
refused up front, to be finished where it started.

Runs are queued at once, up to `jobs` of them, not one after another: on a cluster the grid's
runs go side by side (a paper budget's dozens of runs in the time of a few), and the scheduler,
not this host, decides what starts when. The bound keeps the queue within a site's limit of jobs
per user and this host's share small: each queued run holds a collector and its ports here, and a
server-based protocol's aggregator process. Each is followed from a thread of this process, not
a process of its own: following a job is waiting on sockets and squeue, which a thread does for
nothing, where a process per run would import the runtime again on a login host.

Whatever can refuse a run without its plan is checked for every run before the first job is
queued: the options, Slurm's client commands, each run's inputs and directory, the partition's
size against the largest mesh. Ctrl-C cancels every job the sweep queued (their runs stay
resumable) and queues no more.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from launcher.config.options import ViewOptions
from launcher.errors import LaunchError
from launcher.run.finish import EXIT_INTERRUPTED
from launcher.run.progress import emit
from launcher.run.resume import slurm_inputs
from launcher.slurm import commands
from launcher.slurm.backend import SlurmBackend
from launcher.slurm.job import Resources, check_fits
from launcher.slurm.queue import early_shape, queue
from launcher.slurm.submit import submit
from launcher.sweep.grid import Point, check, points
from launcher.sweep.runner import (
    SweepResult,
    check_owned,
    finished,
    report_sweep,
    resumable,
)
from launcher.sweep.spec import SweepSpec

DEFAULT_JOBS = 16


@dataclass(frozen=True)
class SlurmSweep:
    """How a sweep's runs go to Slurm."""

    resources: Resources = field(default_factory=Resources)
    """What each run's job asks for (one task per node of its mesh besides)."""
    jobs: int = DEFAULT_JOBS
    """Runs queued at once; the next is queued when one ends."""
    collector_host: str | None = None
    """Where the tasks reach this host (None: as `dfl-launch slurm` finds it)."""

    def check(self) -> None:
        self.resources.check()
        if self.jobs < 1:
            raise LaunchError(f"--jobs: must be at least 1, got {self.jobs}")


class Following:
    """The jobs the sweep queued and follows: what Ctrl-C cancels."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.jobs: set[str] = set()
        self.stopped = False

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            jobs = sorted(self.jobs)
        for job in jobs:
            commands.cancel(job)

    @contextlib.contextmanager
    def follow(self, job: str) -> Iterator[bool]:
        """`job` followed for the block; False, and the job cancelled, once the sweep has
        stopped (its sbatch may answer after the Ctrl-C)."""
        with self.lock:
            going = not self.stopped
            if going:
                self.jobs.add(job)
        if not going:
            commands.cancel(job)
        try:
            yield going
        finally:
            with self.lock:
                self.jobs.discard(job)


def preflight(grid: Sequence[Point], options: SlurmSweep) -> None:
    """Refuse, before anything is queued, what would refuse a run later (one line each)."""
    options.check()
    check(list(grid))
    todo = [p for p in grid if not finished(p.run_dir)]
    for point in grid:
        check_owned(point)
    for point in todo:
        if resumable(point.run_dir) and slurm_inputs(point.run_dir) is None:
            raise LaunchError(f"{point.run_dir}: a run interrupted on this machine; finish it "
                              "here (a run resumes where it started), or move it away")
    if not todo:
        return
    commands.require_clients()
    tasks = 0
    for point in todo:
        try:
            tasks = max(tasks, len(early_shape(point.request, point.run_dir).tasks))
        except LaunchError as exc:
            raise LaunchError(f"{point.label}: {exc}") from None
    check_fits(tasks, options.resources,
               *commands.partition_cpus(options.resources.partition))


def run_on_slurm(specs: Sequence[SweepSpec], options: SlurmSweep,
                 on_report: Callable[[str], None] = emit) -> list[SweepResult]:
    """Every unfinished run of `specs` as a Slurm job, up to `options.jobs` at once (a run that
    several specs hold, once); a result per spec, in their order, then each `out`'s report as
    the local runner writes it. A LaunchError (one line) for bad input, before anything is
    queued, or for the first run refused afterwards (no run is queued after it)."""
    results = [SweepResult(out_of(spec), points(spec), skipped=0) for spec in specs]
    grid = [p for result in results for p in result.points]
    preflight(grid, options)
    todo = [p for p in {p.run_dir: p for p in grid}.values() if not finished(p.run_dir)]
    interrupted = run_points(todo, options) if todo else False
    queued = {p.run_dir for p in todo}
    for result in results:
        result.skipped = sum(p.run_dir not in queued for p in result.points)
        result.interrupted = interrupted
    for result in {r.out: r for r in results}.values():
        report_sweep(result, on_report)
    return results


def out_of(spec: SweepSpec) -> Path:
    assert spec.out is not None
    return spec.out


def run_points(todo: Sequence[Point], options: SlurmSweep) -> bool:
    """Queue and follow `todo`; whether the sweep was interrupted (Ctrl-C)."""
    host = options.collector_host or commands.submit_host()
    following = Following()
    view = ViewOptions(quiet=True, plots=False)
    pool = ThreadPoolExecutor(options.jobs, thread_name_prefix="slurm-run")
    futures: list[Future[int]] = []
    try:
        futures = [pool.submit(run_one, p, options.resources, host, following, view)
                   for p in todo]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f for f in done if f.exception() is not None), None)
        if failed is not None:  # queue no more; those queued end as they end
            with following.lock:
                following.stopped = True
            pool.shutdown(wait=True, cancel_futures=True)
            failed.result()  # raises its exception
    except KeyboardInterrupt:
        following.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        return True
    finally:
        pool.shutdown(wait=True)
    return any(f.result() == EXIT_INTERRUPTED for f in futures)


def run_one(point: Point, resources: Resources, host: str, following: Following,
            view: ViewOptions) -> int:
    """One run queued, then followed to its end, as `dfl-launch slurm --submit` does; its exit
    code (130: never queued, the sweep had stopped)."""
    if following.stopped:
        return EXIT_INTERRUPTED
    resuming = resumable(point.run_dir)
    queued = queue(point.request, resources, point.run_dir, resuming=resuming)
    with following.follow(queued.job) as going:
        if not going:
            queued.lock.release()
            return EXIT_INTERRUPTED
        print(f"{point.label}: Slurm job {queued.job}"
              + (" (resumed)" if resuming else ""), flush=True)
        return submit(point.request, SlurmBackend(resources, host), queued, view,
                      resuming=resuming)
