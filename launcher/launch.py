"""One launch, start to finish: resolve, plan, spawn (or thread), collect, summarise."""

from __future__ import annotations

import time
from pathlib import Path

from dfl_node.plan import RunPlan
from launcher.backends.base import LocalBackend
from launcher.backends.hosts import HostsBackend
from launcher.backends.registry import local_backend
from launcher.config.backend_catalog import DEFAULT_LOCAL
from launcher.config.checks import check_local
from launcher.config.inputs import resolve
from launcher.config.keys import secure_plan
from launcher.config.options import Request, ViewOptions
from launcher.config.ports import PortClaims
from launcher.logs import launcher_logger
from launcher.results.cycle_metrics import CycleMetrics
from launcher.run import rundir
from launcher.run.collector import Collector
from launcher.run.faults import interrupted
from launcher.run.finish import EXIT_OK, report, stopped, write_results
from launcher.run.outcome import Outcome
from launcher.run.prephase_coordinator import start_coordinator
from launcher.run.progress import Display, open_display
from launcher.run.resume import prepare_resume, resume_request, start_fresh
from launcher.run.run_files import remove_temporaries

LOG = launcher_logger("launch")


def write_plan_only(req: Request, output: Path) -> None:
    """`dfl-launch plan`: the plan for hosts started by hand, written to `output`."""
    backend = HostsBackend()
    backend.hand_off(backend.resolve(req), output)


def launch(req: Request, out_dir: Path | None, view: ViewOptions) -> int:
    """Run once, or once per seed (one run directory each); the worst exit code wins."""
    if not req.seeds:
        return launch_one(req, out_dir, view)
    base = out_dir or rundir.default_run_dir(req.protocol or "run", Path(req.topology or "").stem)
    codes = []
    for seed in req.seeds:
        one = Request(req.topology, req.protocol, req.config_file,
                      {**req.options, "seed": seed}, req.sets)
        codes.append(launch_one(one, base / f"seed-{seed}", view))
        if stopped(codes[-1]):
            break
    return max(codes, key=lambda c: (c != EXIT_OK, c))


def resume(run_dir: Path, view: ViewOptions) -> int:
    """`--resume RUN_DIR`: the run's own inputs again, into the same directory, from the last
    round all its nodes completed (launcher/run/resume.py)."""
    return launch_one(resume_request(run_dir), run_dir, view, resuming=True)


def launch_one(req: Request, out_dir: Path | None, view: ViewOptions,
               resuming: bool = False, display: Display | None = None) -> int:
    """`display`: what shows the run (default: chosen by stdout and `view.quiet`); a sweep
    passes one that feeds its own bar."""
    # The backend the command line asks for starts what it needs at once, in parallel with
    # resolving the plan (the processes backend forks its zygote: launcher/backends/zygote.py);
    # a config file may still choose another.
    likely = local_backend(req.options.get("transport") or DEFAULT_LOCAL)
    likely.prestart()
    try:
        return run_one(req, out_dir, view, resuming, likely, display)
    finally:
        likely.close()


def run_one(req: Request, out_dir: Path | None, view: ViewOptions, resuming: bool,
            likely: LocalBackend, shown_by: Display | None = None) -> int:
    claims = PortClaims()
    backend = likely
    with shown_by or open_display(view.quiet) as display:
        try:
            display.stage("resolving the plan, preparing data")
            config, plan = resolve(req, claims)
            backend = local_backend(plan.transport)
            if backend is not likely:
                likely.close()
            check_local(plan)
            backend.preflight(plan, str(req.topology))
            run_dir = out_dir or rundir.default_run_dir(plan.protocol, plan.topology_name)
            plan = secure_plan(plan, config, run_dir / "keys")
            resumed_at = (prepare_resume(run_dir, plan, req) if resuming
                          else start_fresh(run_dir, req))
            rundir.prepare(run_dir, config)
            plan_path = run_dir / "plan.json"
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
