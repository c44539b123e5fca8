"""The zmq transport's mesh: one OS process per node, watched until all finish or one fails.

Nodes are forked from a forkserver that has already imported torch and the node code, so a node
starts in a fraction of a second and shares those pages with its siblings, instead of paying a
fresh interpreter and torch import each. The launcher watches exit codes and pumps the
collector; the first node to exit non-zero ends the run, and every other node is stopped, so
nothing is left behind.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from multiprocessing.process import BaseProcess
from pathlib import Path

from dfl_node.cli import run_launched
from dfl_node.plan import RunPlan
from launcher.collector import Collector
from launcher.outcome import Outcome

TERM_GRACE_S = 3.0
PRELOAD = ["dfl_node.preload"]


def forkserver() -> mp.context.BaseContext:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def start_nodes(plan: RunPlan, plan_path: Path, run_dir: Path,
                procs: dict[int, BaseProcess]) -> None:
    """Start every node into `procs`, so a caller interrupted half-way can stop those started."""
    ctx = forkserver()
    for node_id in plan.ids:
        args = (str(plan_path), node_id, str(run_dir), os.getpid())
        proc = ctx.Process(target=run_launched, args=args, name=f"node-{node_id}", daemon=True)
        proc.start()
        procs[node_id] = proc


def stop_nodes(procs: dict[int, BaseProcess]) -> None:
    """SIGTERM, a grace period, then SIGKILL: no orphan survives the launcher."""
    for proc in procs.values():
        if proc.exitcode is None:
            proc.terminate()
    for proc in procs.values():
        proc.join(TERM_GRACE_S)
        if proc.exitcode is None:
            proc.kill()
            proc.join()


def describe_exit(code: int) -> str:
    if code < 0:
        return f"killed by signal {-code} ({signal.Signals(-code).name})"
    return f"exit status {code}"


def first_failure(procs: dict[int, BaseProcess]) -> tuple[int, int] | None:
    for node_id, proc in procs.items():
        if proc.exitcode is not None and proc.exitcode != 0:
            return node_id, proc.exitcode
    return None


def log_tail(run_dir: Path, node_id: int, lines: int = 5) -> str:
    path = run_dir / "logs" / f"node-{node_id}.log"
    text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return "\n".join(text[-lines:])


def run_processes(plan: RunPlan, plan_path: Path, run_dir: Path,
                  collector: Collector) -> Outcome:
    procs: dict[int, BaseProcess] = {}
    try:
        start_nodes(plan, plan_path, run_dir, procs)
        pids = {i: p.pid for i, p in procs.items() if p.pid is not None}
        while any(p.exitcode is None for p in procs.values()):
            collector.pump(0.1)
            failure = first_failure(procs)
            if failure is not None:
                return Outcome(False, failure[0], describe_exit(failure[1]), pids)
        failure = first_failure(procs)
        if failure is not None:
            return Outcome(False, failure[0], describe_exit(failure[1]), pids)
        collector.drain()
        return Outcome(True, pids=pids)
    finally:
        stop_nodes(procs)
        collector.drain(0.05)
