"""One launch, start to finish: resolve, plan, spawn (or thread), collect, summarise."""

from __future__ import annotations

import queue
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from dfl_node.plan import RunPlan
from dfl_node.prephase import InprocPrephaseHub
from launcher import rundir
from launcher.collector import Collector, QueueSource, ZmqSource
from launcher.config import resolve_config
from launcher.cycle_metrics import CycleMetrics
from launcher.endpoints import wildcard_bind
from launcher.errors import LaunchError
from launcher.inproc import run_threads
from launcher.linkreport import write_link_report
from launcher.options import Request
from launcher.outcome import Outcome
from launcher.planner import build_plan
from launcher.ports import PortClaims
from launcher.prephase import start_coordinator
from launcher.spawn import log_tail, run_processes
from launcher.summary import summarize, write_ledger
from protocols.registry import PROTOCOLS
from topologies.errors import TopologyError
from topologies.loader import load_topology, resolve_topology_path
from topologies.model import Topology

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def resolve(req: Request, claims: PortClaims) -> tuple[dict[str, Any], RunPlan]:
    """Everything a run needs, or a LaunchError naming what is wrong."""
    topo, config = resolve_inputs(req)
    return config, build_plan(topo, config, claims,
                              aggregator=PROTOCOLS[config["protocol"]].server_based)


def resolve_inputs(req: Request) -> tuple[Topology, dict[str, Any]]:
    """The topology and the resolved config, validated; a LaunchError naming what is wrong."""
    if not req.topology:
        raise LaunchError("--topology is required")
    if not req.protocol:
        raise LaunchError("--protocol is required")
    if req.protocol not in PROTOCOLS:
        raise LaunchError(f"--protocol: unknown protocol {req.protocol!r} "
                          f"(known: {', '.join(sorted(PROTOCOLS))})")
    try:
        topo = load_topology(resolve_topology_path(req.topology))
    except TopologyError as exc:
        raise LaunchError(str(exc)) from None
    config = resolve_config(req.protocol, req.config_file, req.options, req.sets)
    try:
        PROTOCOLS[req.protocol].check_hyper(config["hyper"])
    except ValueError as exc:
        raise LaunchError(f"hyper: {exc}") from None
    config["topology"] = topo.name
    return topo, config


def write_plan_only(req: Request, output: Path) -> None:
    claims = PortClaims()
    try:
        _, plan = resolve(req, claims)
    finally:
        claims.release()
    output.parent.mkdir(parents=True, exist_ok=True)
    plan.dump(output)


def launch(req: Request, out_dir: Path | None) -> int:
    """Run once, or once per seed (one run directory each); the worst exit code wins."""
    if not req.seeds:
        return launch_one(req, out_dir)
    base = out_dir or rundir.default_run_dir(req.protocol or "run", Path(req.topology or "").stem)
    codes = []
    for seed in req.seeds:
        one = Request(req.topology, req.protocol, req.config_file,
                      {**req.options, "seed": seed}, req.sets)
        codes.append(launch_one(one, base / f"seed-{seed}"))
        if codes[-1] == EXIT_INTERRUPTED:
            break
    return max(codes, key=lambda c: (c != EXIT_OK, c))


def launch_one(req: Request, out_dir: Path | None) -> int:
    claims = PortClaims()
    try:
        config, plan = resolve(req, claims)
        run_dir = out_dir or rundir.default_run_dir(plan.protocol, plan.topology_name)
        rundir.prepare(run_dir, config)
        plan_path = run_dir / "plan.json"
        plan.dump(plan_path)
        started = time.monotonic()
        outcome, collector = execute(plan, plan_path, run_dir)
    finally:
        claims.release()
    summary = summarize(plan, config, collector, outcome, time.monotonic() - started)
    rundir.write_json(run_dir / "summary.json", summary)
    write_ledger(run_dir, collector.done)
    write_link_report(run_dir, plan, collector.done)
    return report(outcome, run_dir, summary)


def execute(plan: RunPlan, plan_path: Path, run_dir: Path) -> tuple[Outcome, Collector]:
    hub = InprocPrephaseHub(plan.ids) if plan.transport == "inproc" else None
    cycles = CycleMetrics.for_plan(plan, run_dir)
    if plan.transport == "inproc":
        sink: queue.Queue = queue.Queue()
        collector = Collector(QueueSource(sink), run_dir, plan.ids, cycles)
        runner = partial(run_threads, plan, run_dir, collector, sink, hub)
    else:
        collector = Collector(ZmqSource(wildcard_bind(plan.collector)), run_dir, plan.ids, cycles)
        runner = partial(run_processes, plan, plan_path, run_dir, collector)
    coordinator = start_coordinator(plan, run_dir, hub)
    try:
        return runner(), collector
    except KeyboardInterrupt:
        return Outcome(False, reason="interrupted"), collector
    finally:
        collector.close()
        if coordinator is not None:
            coordinator.join()
            if coordinator.error:
                print(f"dfl-launch: pre-phase: {coordinator.error}", file=sys.stderr)


def report(outcome: Outcome, run_dir: Path, summary: dict[str, Any]) -> int:
    if outcome.ok:
        print(f"run finished: {run_dir}  avg_accuracy={summary['avg_accuracy']:.4f}  "
              f"worst_accuracy={summary['worst_accuracy']:.4f}")
        return EXIT_OK
    if outcome.status == "interrupted":
        print(f"dfl-launch: interrupted; completed evaluations kept in {run_dir}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    node = outcome.failed_node
    print(f"dfl-launch: node {node} failed ({outcome.reason}); run directory {run_dir}",
          file=sys.stderr)
    tail = log_tail(run_dir, node) if node is not None else ""
    if tail:
        print(tail, file=sys.stderr)
    return EXIT_FAILED
