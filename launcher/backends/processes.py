"""The zmq transport's mesh: one OS process per node, watched until all finish or one fails.

Nodes are forked from the zygote (launcher/backends/zygote.py), a fork of the launcher made
before the plan is resolved that has torch imported and warmed up, so a node starts in a
fraction of a second and shares those pages with the launcher and its siblings, instead of
paying a fresh interpreter and torch import each. The launcher watches exit codes and pumps the
collector; what a node's death does (the run stops, or goes on without it) is
launcher/run/on_failure.py's to decide, and at the end every node still running is stopped, so
nothing is left behind.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from dfl_node.plan import RunPlan
from dfl_node.transports.encryption import COLLECTOR, load_curve
from launcher.backends.base import LocalBackend, LocalMesh, OnRecord
from launcher.backends.zygote import NodeProcess, Zygote, ZygoteLost
from launcher.config.backend_catalog import PROCESSES
from launcher.config.checks import check_listeners_free
from launcher.node_cli import run_launched
from launcher.results.cycle_metrics import CycleMetrics
from launcher.run.collector import Collector, ZmqSource
from launcher.run.faults import zygote_died
from launcher.run.on_failure import FailureWatch, describe_exit
from launcher.run.outcome import Outcome

TERM_GRACE_S = 3.0


def warm_up_mode(devices: Iterable[str]) -> str:
    """The zygote's warm-up (launcher/backends/preload.py): no backward pass if any node
    uses a GPU."""
    return "forward" if any(device != "cpu" for device in devices) else "full"


def start_nodes(plan: RunPlan, plan_path: Path, run_dir: Path, zygote: Zygote,
                procs: dict[int, NodeProcess],
                between: Callable[[], object] = lambda: None) -> None:
    """Start every node into `procs`, so a caller interrupted half-way can stop those started;
    `between` runs after each start (the collector takes the `ready` records of the nodes
    started so far, so that their ready times are true while hundreds more start)."""
    calls = [(str(plan_path), node_id, str(run_dir), os.getpid()) for node_id in plan.ids]
    for node_id, proc in zip(plan.ids, zygote.start(calls), strict=True):
        procs[node_id] = proc
        between()


def stop_nodes(procs: dict[int, NodeProcess]) -> None:
    """SIGTERM, a grace period, then SIGKILL: no orphan survives the launcher."""
    for proc in procs.values():
        if proc.alive:
            proc.terminate()
    for proc in procs.values():
        proc.join(TERM_GRACE_S)
        if proc.alive:
            proc.kill()
            proc.join()


def exit_codes(procs: dict[int, NodeProcess]) -> dict[int, int | None]:
    return {node_id: proc.exitcode for node_id, proc in procs.items()}


def kill_now(procs: dict[int, NodeProcess], node_id: int | None) -> None:
    """SIGKILL a node declared dead: a hung process would not heed SIGTERM's grace anyway."""
    proc = procs.get(node_id) if node_id is not None else None
    if proc is not None and proc.alive:
        proc.kill()


def run_processes(plan: RunPlan, plan_path: Path, run_dir: Path, zygote: Zygote,
                  collector: Collector) -> Outcome:
    procs: dict[int, NodeProcess] = {}
    watch = FailureWatch(collector, plan.wire.on_failure == "continue")
    try:
        try:
            start_nodes(plan, plan_path, run_dir, zygote, procs,
                        lambda: collector.pump_all(0.0))
        except ZygoteLost:
            return zygote_died(zygote.pid, describe_exit(zygote.lost_code))
        pids = {i: p.pid for i, p in procs.items() if p.pid is not None}
        while True:
            collector.pump_all(0.1)
            exits = exit_codes(procs)
            if zygote.lost:  # every exit it did not report reads LOST: no node is to blame
                died = zygote_died(zygote.pid, describe_exit(zygote.lost_code))
                died.pids = pids
                return died
            failure = watch.failure(exits)
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
    """Nodes forked from the zygote, reporting to a collector socket of this process."""

    spec = PROCESSES

    def __init__(self) -> None:
        self.zygote: Zygote | None = None

    def prestart(self) -> None:
        self.close()
        self.zygote = Zygote(run_launched)

    def close(self) -> None:
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None

    def preflight(self, plan: RunPlan, topology: str) -> None:
        check_listeners_free(plan, topology)

    def open(self, plan: RunPlan, plan_path: Path, run_dir: Path,
             cycles: CycleMetrics | None, on_record: OnRecord) -> LocalMesh:
        if self.zygote is None:  # not started before the launch: started now, as late as it can be
            self.prestart()
        assert self.zygote is not None
        self.zygote.warm_up(warm_up_mode(plan.node(i).device for i in plan.ids) == "full",
                            plan_path)
        source = ZmqSource(plan, curve=load_curve(plan, COLLECTOR))
        collector = Collector(source, run_dir, plan.ids, cycles, on_record)
        return LocalMesh(collector, partial(run_processes, plan, plan_path, run_dir, self.zygote,
                                            collector))
