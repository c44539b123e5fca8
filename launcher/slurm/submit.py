"""`dfl-launch slurm --submit`, once the job is queued: the plan, the run collected here, the job
followed to its end.

The collector and the directory listen before the job's hosts get the plan, so no node reports
to a port that is not open yet; the run then ends as a local one does (live progress, the run
directory filled, exit 0, 1 or 130), with one more way to end: the job leaves the queue (time
limit, scancel, a node that Slurm killed) while nodes have not finished, which fails the run
naming the first of them. Ctrl-C cancels the job, as it stops a local run's nodes, and so does
any failure here: nothing this command started is left in the queue.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from dfl_node.plan import RunPlan
from launcher.collect_remote import open_collector
from launcher.config.options import ViewOptions
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from launcher.run import directory
from launcher.run.address_book import AddressBook
from launcher.run.collector import Collector
from launcher.run.faults import interrupted
from launcher.run.finish import report, write_results
from launcher.run.on_failure import FailureWatch
from launcher.run.outcome import Outcome
from launcher.run.prephase_coordinator import start_coordinator
from launcher.run.progress import Display, open_display
from launcher.run.resume import (
    INPUTS_FILE,
    SLURM_KEY,
    prepare_resume,
    reset_run_dir,
    resume_request,
    slurm_inputs,
)
from launcher.slurm import commands
from launcher.slurm.backend import SlurmBackend
from launcher.slurm.job import (
    PLAN,
    JobShape,
    Resources,
    exit_file,
    node_command,
    task_ids,
)
from launcher.slurm.queue import Queued, queue

PUMP_S = 0.5
STOP_S = 10.0  # how long the aggregator may take to stop once the run has ended
JOB_POLL_S = 2.0  # how often squeue is asked whether the job still runs


def node_exits(run_dir: Path, plan: RunPlan, hub: subprocess.Popen[bytes] | None,
               ) -> dict[int, int | None]:
    """Each node's exit status (None: still running, or not started): the tasks' as the batch
    script recorded their steps', the aggregator's from its process here."""
    exits: dict[int, int | None] = {}
    for node in task_ids(plan):
        try:
            exits[node] = int(exit_file(run_dir, node).read_text())
        except (OSError, ValueError):
            exits[node] = None
    if hub is not None and plan.aggregator is not None:
        exits[plan.aggregator] = hub.poll()
    return exits


def start_aggregator(plan: RunPlan, run_dir: Path) -> subprocess.Popen[bytes] | None:
    """A server-based protocol's aggregator, on this host where its address is."""
    if plan.aggregator is None:
        return None
    log = run_dir / "logs" / f"node-{plan.aggregator}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen([*node_command(sys.executable, run_dir / "plan.json", run_dir,
                                               forked=False), str(plan.aggregator)],
                                stdout=out, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def follow(collector: Collector, plan: RunPlan, job: str, run_dir: Path,
           hub: subprocess.Popen[bytes] | None) -> Outcome:
    """Pump records until every node is done, one reports an error, a node fails (the
    batch script records each node's exit status), or the job has ended without some of them
    (what was queued by then is read first)."""
    watch = FailureWatch(collector, plan.wire.on_failure == "continue")
    asked = time.monotonic()
    while not set(plan.ids) <= set(collector.done) | watch.dropped():
        if (failed := watch.failure(node_exits(run_dir, plan, hub))) is not None:
            return failed
        if time.monotonic() - asked >= JOB_POLL_S:
            asked = time.monotonic()
            state = commands.job_state(job)
            if state not in commands.ACTIVE:
                collector.drain()
                if (failed := watch.failure(node_exits(run_dir, plan, hub))) is not None:
                    return failed
                missing = sorted(set(plan.ids) - set(collector.done) - watch.dropped())
                if missing:
                    return Outcome(False, missing[0], f"Slurm job {job} ended "
                                   f"({state or 'gone'}) before nodes {missing} finished")
                break
        collector.pump_all(PUMP_S)
    collector.drain()
    return watch.success({})


def run_job(backend: SlurmBackend, plan: RunPlan, job: str, run_dir: Path, display: Display,
            coordinate: bool) -> tuple[Outcome, Collector, float]:
    """Listen (the collector, the directory and, with `coordinate`, the pre-phase's coordinator:
    a resumed run has its result already), then give the queued job its plan and follow it;
    the job cancelled unless the run succeeded."""
    collector = open_collector(plan, run_dir, None, display.on_record)
    try:
        directory = AddressBook(plan)
    except LaunchError:
        collector.close()
        raise
    coordinator = start_coordinator(plan, run_dir, None) if coordinate else None
    backend.close()  # the ports are bound now
    hub: subprocess.Popen[bytes] | None = None
    outcome = Outcome(False, reason="not started")
    started = time.monotonic()
    try:
        backend.complete(plan, run_dir)  # the job's hosts go
        hub = start_aggregator(plan, run_dir)
        display.stage(f"Slurm job {job}: {len(task_ids(plan))} tasks")
        outcome = follow(collector, plan, job, run_dir, hub)
    except KeyboardInterrupt as exc:
        outcome = interrupted(exc)
    finally:
        if not outcome.ok:
            commands.cancel(job)
        stop(hub)
        collector.close()
        directory.close()
        collector.rejected.update(directory.rejected)
        if coordinator is not None:
            coordinator.join()
            collector.rejected.update(coordinator.rejected)
    return outcome, collector, time.monotonic() - started


def submit(req: RunSpec, backend: SlurmBackend, queued: Queued, view: ViewOptions,
           resuming: bool = False) -> int:
    """The whole `--submit` (or `--resume` of a Slurm run: the same request, from the last
    round every node has a checkpoint of) once the job is queued (launcher/slurm/queue.py):
    resolve the plan, collect the run; the exit code of `dfl-launch`. Anything that refuses
    the run here cancels the job, whose hosts are still waiting for the plan."""
    run_dir = queued.run_dir
    try:
        config, plan = backend.resolve_run(req)
        shape = JobShape.of(plan, run_dir / PLAN, run_dir)
        if (shape.name, shape.tasks) != (queued.shape.name, queued.shape.tasks):
            raise LaunchError(f"the plan's tasks ({shape.name}: {len(shape.tasks)}) are not "
                              f"the queued job's ({queued.shape.name}: "
                              f"{len(queued.shape.tasks)})")
        resumed_at = (prepare_resume(run_dir, plan, req, config["on_corrupt"]) if resuming
                      else 0)
        if not resuming:
            reset_run_dir(run_dir, req)
            record_slurm(run_dir, backend)
        directory.prepare(run_dir, config)
    except BaseException:
        backend.close()
        commands.cancel(queued.job)
        queued.lock.release()
        raise
    with queued.lock, open_display(view.quiet) as display:
        display.start(plan)
        try:
            outcome, collector, seconds = run_job(backend, plan, queued.job, run_dir, display,
                                                  coordinate=resumed_at == 0)
        except BaseException:  # before it followed the job (a port taken, Ctrl-C)
            backend.close()
            commands.cancel(queued.job)
            raise
        results = write_results(plan, config, collector, outcome, seconds, run_dir, view,
                                display)
        return report(results, run_dir, display)


def record_slurm(run_dir: Path, backend: SlurmBackend) -> None:
    """Add what the job asked Slurm for to the run's inputs, so `--resume` asks again."""
    path = run_dir / INPUTS_FILE
    body = json.loads(path.read_text())
    body[SLURM_KEY] = {**asdict(backend.resources), "collector_host": backend.host}
    path.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")


def resume(run_dir: Path, view: ViewOptions, on_corrupt: str | None = None) -> int:
    """`dfl-launch --resume RUN_DIR` of a run submitted to Slurm: the same job again, asking
    for the same resources, collected here (`on_corrupt`: as launch.resume)."""
    asked = dict(slurm_inputs(run_dir) or {})
    host = asked.pop("collector_host")
    try:
        resources = Resources(**asked)
    except TypeError as exc:
        raise LaunchError(f"{run_dir / INPUTS_FILE}: unreadable: {exc}") from None
    req = resume_request(run_dir, on_corrupt)
    queued = queue(req, resources, run_dir, resuming=True)
    return submit(req, SlurmBackend(resources, host), queued, view, resuming=True)
