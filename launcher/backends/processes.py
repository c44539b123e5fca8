"""The zmq transport's mesh: one OS process per node, watched until all finish or one fails.

Nodes are forked from a forkserver that has already imported torch and the node code, so a node
starts in a fraction of a second and shares those pages with its siblings, instead of paying a
fresh interpreter and torch import each. The launcher watches exit codes and pumps the
collector; what a node's death does (the run stops, or goes on without it) is
launcher/run/on_failure.py's to decide, and at the end every node still running is stopped, so
nothing is left behind.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterable
from functools import partial
from multiprocessing.process import BaseProcess
from pathlib import Path

from dfl_node.learning.torch_settings import WARM_UP_ENV
from dfl_node.plan import RunPlan
from dfl_node.transports.encryption import COLLECTOR, load_curve
from launcher.backends.base import LocalBackend, LocalMesh, OnRecord
from launcher.config.backend_catalog import PROCESSES
from launcher.config.checks import check_listeners_free
from launcher.config.endpoints import wildcard_bind
from launcher.node_cli import run_launched
from launcher.results.cycle_metrics import CycleMetrics
from launcher.run.collector import Collector, ZmqSource
from launcher.run.on_failure import FailureWatch
from launcher.run.outcome import Outcome

TERM_GRACE_S = 3.0
# launcher.cli first: multiprocessing runs the launcher's main module again in every forked
# child before the node starts, and with `dfl-launch` (or `python -m launcher.cli`) that module
# imports the whole launcher (0.07 s of CPU and 3 MB per node, 14 s for 200 nodes on 2 cores)
# unless the forkserver has imported it once. launcher.backends.preload last: it freezes the garbage
# collector over everything imported before it.
PRELOAD = ["launcher.cli", "launcher.backends.preload"]


def warm_up_mode(devices: Iterable[str]) -> str:
    """The forkserver's warm-up (launcher/backends/preload.py): no backward pass if any node
    uses a GPU."""
    return "forward" if any(device != "cpu" for device in devices) else "full"


def forkserver(devices: Iterable[str]) -> mp.context.ForkServerContext:
    """The forkserver context; its settings reach the server through the environment, which it
    inherits when it starts (on the first node's start)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    os.environ[WARM_UP_ENV] = warm_up_mode(devices)
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def start_nodes(plan: RunPlan, plan_path: Path, run_dir: Path,
                procs: dict[int, BaseProcess],
                between: Callable[[], object] = lambda: None) -> None:
    """Start every node into `procs`, so a caller interrupted half-way can stop those started;
    `between` runs after each start (the collector takes the `ready` records of the nodes
    started so far, so that their ready times are true while hundreds more start)."""
    ctx = forkserver(plan.node(i).device for i in plan.ids)
    for node_id in plan.ids:
        args = (str(plan_path), node_id, str(run_dir), os.getpid())
        proc = ctx.Process(target=run_launched, args=args, name=f"node-{node_id}", daemon=True)
        proc.start()
        procs[node_id] = proc
        between()


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


def exit_codes(procs: dict[int, BaseProcess]) -> dict[int, int | None]:
    return {node_id: proc.exitcode for node_id, proc in procs.items()}


def kill_now(procs: dict[int, BaseProcess], node_id: int | None) -> None:
    """SIGKILL a node declared dead: a hung process would not heed SIGTERM's grace anyway."""
    proc = procs.get(node_id) if node_id is not None else None
    if proc is not None and proc.exitcode is None:
        proc.kill()


def log_tail(run_dir: Path, node_id: int, lines: int = 5) -> str:
    path = run_dir / "logs" / f"node-{node_id}.log"
    text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return "\n".join(text[-lines:])


def run_processes(plan: RunPlan, plan_path: Path, run_dir: Path,
                  collector: Collector) -> Outcome:
    procs: dict[int, BaseProcess] = {}
    watch = FailureWatch(collector, plan.wire.get("on_failure") == "continue")
    try:
        start_nodes(plan, plan_path, run_dir, procs, lambda: collector.pump_all(0.0))
        pids = {i: p.pid for i, p in procs.items() if p.pid is not None}
        while True:
            collector.pump_all(0.1)
            failure = watch.failure(exit_codes(procs))
            if failure is not None:
                kill_now(procs, failure.failed_node)
                failure.pids = pids
                return failure
            if watch.finished(exit_codes(procs)):
                break
        collector.drain()
        return watch.success(pids)
    finally:
        stop_nodes(procs)
        collector.drain(0.05)


class ProcessesBackend(LocalBackend):
    """Nodes forked from the forkserver, reporting to a collector socket of this process."""

    spec = PROCESSES

    def preflight(self, plan: RunPlan, topology: str) -> None:
        check_listeners_free(plan, topology)

    def open(self, plan: RunPlan, plan_path: Path, run_dir: Path,
             cycles: CycleMetrics | None, on_record: OnRecord) -> LocalMesh:
        source = ZmqSource(wildcard_bind(plan.collector), curve=load_curve(plan, COLLECTOR))
        collector = Collector(source, run_dir, plan.ids, cycles, on_record)
        return LocalMesh(collector, partial(run_processes, plan, plan_path, run_dir, collector))
