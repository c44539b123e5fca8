"""`dfl-launch slurm --submit`: submit the batch script, collect the run here, follow the job.

The collector and the directory listen before sbatch runs, so no task reports to a port that is
not open yet; the run then ends as a local one does (live progress, the run directory filled,
exit 0, 1 or 130), with one more way to end: the job leaves the queue (time limit, scancel, a
node that Slurm killed) while nodes have not finished, which fails the run naming the first
of them. Ctrl-C cancels the job, as it stops a local run's nodes, and so does any failure
here: nothing this command started is left in the queue.
"""

from __future__ import annotations

import time
from pathlib import Path

from dfl_node.plan import RunPlan
from launcher.backends import slurm_cluster
from launcher.backends.slurm import SlurmBackend
from launcher.collect_remote import open_collector
from launcher.config.options import Request, ViewOptions
from launcher.config.slurm_job import check_fits
from launcher.errors import LaunchError
from launcher.launch import report, write_results
from launcher.run.collector import Collector
from launcher.run.directory import Directory
from launcher.run.on_failure import FailureWatch
from launcher.run.outcome import Outcome
from launcher.run.progress import Display, open_display

PUMP_S = 0.5
JOB_POLL_S = 2.0  # how often squeue is asked whether the job still runs


def follow(collector: Collector, plan: RunPlan, job: str) -> Outcome:
    """Pump records until every node is done, one reports an error, or the job has ended
    without some of them (what was queued by then is read first)."""
    watch = FailureWatch(collector, plan.wire.get("on_failure") == "continue")
    asked = time.monotonic()
    while not set(plan.ids) <= set(collector.done) | watch.dropped():
        if collector.errors:
            return watch.blame()
        if time.monotonic() - asked >= JOB_POLL_S:
            asked = time.monotonic()
            state = slurm_cluster.job_state(job)
            if state not in slurm_cluster.ACTIVE:
                collector.drain()
                missing = sorted(set(plan.ids) - set(collector.done) - watch.dropped())
                if collector.errors:
                    return watch.blame()
                if missing:
                    return Outcome(False, missing[0], f"Slurm job {job} ended "
                                   f"({state or 'gone'}) before nodes {missing} finished")
                break
        collector.pump_all(PUMP_S)
    collector.drain()
    return watch.success({})


def run_job(backend: SlurmBackend, plan: RunPlan, script: Path, run_dir: Path,
            display: Display) -> tuple[Outcome, Collector, float]:
    """Listen, submit, follow; the job cancelled unless the run succeeded."""
    collector = open_collector(plan, run_dir, None, display.on_record)
    try:
        directory = Directory(plan)
    except LaunchError:
        collector.close()
        raise
    backend.close()  # the ports are bound now
    job: str | None = None
    outcome = Outcome(False, reason="not submitted")
    started = time.monotonic()
    try:
        job = slurm_cluster.submit(str(script))
        display.stage(f"Slurm job {job}: {len(plan.ids)} tasks")
        outcome = follow(collector, plan, job)
    except KeyboardInterrupt:
        outcome = Outcome(False, reason="interrupted")
    finally:
        collector.close()
        directory.close()
        collector.rejected.update(directory.rejected)
        if job is not None and not outcome.ok:
            slurm_cluster.cancel(job)
    return outcome, collector, time.monotonic() - started


def submit(req: Request, backend: SlurmBackend, run_dir: Path, view: ViewOptions) -> int:
    """The whole `--submit`: refuse what the cluster cannot run, write, submit, collect; the
    exit code of `dfl-launch`."""
    try:
        plan = backend.resolve(req)
        check_fits(plan, backend.resources, *slurm_cluster.partition_cpus(
            backend.resources.partition))
        script = backend.hand_off(plan, run_dir)
    except BaseException:
        backend.close()
        raise
    run_dir = script.parent
    with open_display(view.quiet) as display:
        display.start(plan)
        outcome, collector, seconds = run_job(backend, plan, script, run_dir, display)
        summary = write_results(plan, {"hyper": plan.hyper}, collector, outcome, seconds,
                                run_dir, view, display)
        return report(outcome, run_dir, summary, display)
