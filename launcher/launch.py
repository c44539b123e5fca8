"""One launch, start to finish: resolve, plan, spawn (or thread), collect, summarise."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from launcher.config.backend_catalog import DEFAULT_LOCAL
from launcher.config.inputs import Inputs, resolve_inputs
from launcher.config.options import ViewOptions
from launcher.config.run_spec import RunSpec
from launcher.logs import launcher_logger
from launcher.run import directory
from launcher.run.claim import check_new, finished
from launcher.run.lock import RunLock

if TYPE_CHECKING:
    from dfl_node.plan import RunPlan
    from launcher.backends.base import LocalBackend
    from launcher.run.collector import Collector
    from launcher.run.outcome import Outcome
    from launcher.run.progress import Display

# What a launch runs with (the node runtime, ZeroMQ, numpy: a third of a second) is imported
# once its request has passed the checks (`resolve_inputs`), so that bad input is refused at
# the cost of the checks alone (issue 45; bench/refusal_cost.py).

LOG = launcher_logger("launch")


def write_plan_only(req: RunSpec, output: Path) -> None:
    """`dfl-launch plan`: the plan for hosts started by hand, written to `output`."""
    from launcher.backends.hosts import HostsBackend

    backend = HostsBackend()
    backend.hand_off(backend.resolve(req), output)


def launch(req: RunSpec, out_dir: Path | None, view: ViewOptions, overwrite: bool = False) -> int:
    """Run once, or once per seed (one run directory each); the worst exit code wins."""
    if not req.seeds:
        return launch_one(req, out_dir, view, overwrite=overwrite)
    from launcher.run.finish import EXIT_OK, stopped

    base = out_dir or directory.default_run_dir(req.protocol or "run",
                                                Path(req.topology or "").stem)
    codes = []
    for seed in req.seeds:
        codes.append(launch_one(req.with_seed(seed), base / f"seed-{seed}", view,
                                overwrite=overwrite))
        if stopped(codes[-1]):
            break
    return max(codes, key=lambda c: (c != EXIT_OK, c))


def resume(run_dir: Path, view: ViewOptions, on_corrupt: str | None = None) -> int:
    """`--resume RUN_DIR`: the run's own inputs again, into the same directory, from the last
    round all its nodes hold intact (launcher/run/resume.py); `on_corrupt` replaces the run's
    policy for a refused checkpoint."""
    from launcher.run.resume import resume_request

    return launch_one(resume_request(run_dir, on_corrupt), run_dir, view, resuming=True)


def launch_one(req: RunSpec, out_dir: Path | None, view: ViewOptions,
               resuming: bool = False, display: Display | None = None,
               overwrite: bool = False) -> int:
    """`display`: what shows the run (default: chosen by stdout and `view.quiet`); a sweep
    passes one that feeds its own bar. `overwrite`: a new run may take a directory that holds
    other files than its own, replacing only its run files (launcher/run/claim.py)."""
    if out_dir is not None and not resuming:
        check_new(out_dir, req, overwrite)  # before any work: a refused directory costs no wait
    with ExitStack() as held:
        lock = held.enter_context(RunLock(out_dir)) if resuming and out_dir else None
        if lock is not None and out_dir is not None and finished(out_dir):
            # before the zygote: a finished run is looked at, never run again or rewritten
            from launcher.run.progress import emit

            emit(f"run_dir: {out_dir}  finished already (summary.json: status ok); "
                 "nothing to resume")
            return 0  # launcher.run.finish.EXIT_OK
        inputs = resolve_inputs(req)  # bad input is refused here, before torch is imported
        # The local backends bring the node runtime and torch (seconds to import): only for a
        # request that holds. The one the command line asks for starts what it needs at once,
        # in parallel with building the plan (the processes backend forks its zygote:
        # launcher/backends/zygote.py); a config file may still choose another.
        from launcher.backends.registry import local_backend

        likely = local_backend(req.options.transport or DEFAULT_LOCAL)
        likely.prestart()
        held.callback(likely.close)
        return run_one(req, inputs, out_dir, view, likely, lock, overwrite, display)


def run_one(req: RunSpec, inputs: Inputs, out_dir: Path | None, view: ViewOptions,
            likely: LocalBackend, resumed: RunLock | None, overwrite: bool,
            shown_by: Display | None = None) -> int:
    """`resumed`: the lock of the run directory a --resume took already; a new run takes its
    own once the plan names its directory (launcher/run/claim.py), until the launch ends."""
    from launcher.backends.registry import local_backend  # loaded by launch_one already
    from launcher.config.checks import check_local
    from launcher.config.disk_space import check_disk_space
    from launcher.config.inputs import plan_inputs
    from launcher.config.keys import secure_plan
    from launcher.config.ports import PortClaims
    from launcher.run.claim import claim_new, start_fresh, writing
    from launcher.run.finish import report, write_results
    from launcher.run.progress import open_display
    from launcher.run.resume import prepare_resume

    claims = PortClaims()
    backend = likely
    with ExitStack() as held, shown_by or open_display(view.quiet) as display:
        try:
            display.stage("resolving the plan, preparing data")
            config, plan = plan_inputs(req, inputs, claims)
            backend = local_backend(plan.transport)
            if backend is not likely:
                likely.close()
            check_local(plan)
            backend.preflight(plan, str(req.topology))
            run_dir = out_dir or directory.default_run_dir(plan.protocol, plan.topology_name)
            resuming = resumed is not None
            lock = resumed or held.enter_context(claim_new(run_dir, req, overwrite))
            check_disk_space(plan, run_dir)
            plan_path = run_dir / "plan.json"
            with writing(run_dir):
                if not resuming:
                    start_fresh(run_dir, lock, req)
                plan = secure_plan(plan, config, run_dir / "keys")
                resumed_at = (prepare_resume(run_dir, plan, req, config["on_corrupt"])
                              if resuming else 0)
                if resuming:  # after the checks: a refused resume leaves every file as it was
                    lock.mark()
                directory.prepare(run_dir, config)
                plan.dump(plan_path)
            display.start(plan)
            display.stage(f"starting {len(plan.ids)} nodes")
            started = time.monotonic()
            outcome, collector = execute(backend, plan, plan_path, run_dir, display,
                                         coordinate=resumed_at == 0)
        finally:
            claims.release()
            backend.close()
        results = write_results(plan, config, collector, outcome,
                                time.monotonic() - started, run_dir, view, display)
    return report(results, run_dir, display)


def execute(backend: LocalBackend, plan: RunPlan, plan_path: Path, run_dir: Path,
            display: Display, coordinate: bool = True) -> tuple[Outcome, Collector]:
    """`coordinate`: run the pre-phase's coordinator (a resumed run has its result already)."""
    from launcher.results.cycle_metrics import CycleMetrics
    from launcher.run.claim import writing
    from launcher.run.directory import remove_temporaries
    from launcher.run.faults import interrupted
    from launcher.run.prephase_coordinator import start_coordinator

    with writing(run_dir):
        mesh = backend.open(plan, plan_path, run_dir, CycleMetrics.for_plan(plan, run_dir),
                            display.on_record)
    collector = mesh.collector
    coordinator = start_coordinator(plan, run_dir, mesh.prephase_hub) if coordinate else None
    try:
        return mesh.run(), collector
    except KeyboardInterrupt as exc:
        return interrupted(exc), collector
    finally:
        collector.close()
        remove_temporaries(run_dir)
        if coordinator is not None:
            coordinator.join()
            collector.rejected.update(coordinator.rejected)
            if coordinator.error:
                LOG.error("pre-phase: %s", coordinator.error)
