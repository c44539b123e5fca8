"""`dfl-launch collect --plan PLAN --out DIR`: the results of a mesh started elsewhere.

The nodes of a plan stream their records (metrics at each evaluation, a final `done` with their
ledgers) to the plan's collector address as control traffic, whether the launcher spawned them
or an operator started one `dfl-node` per host. This command is that collector without the
spawning: it listens on the collector's port (every interface, unless the plan's address is
loopback), validates what arrives exactly as the launcher does, and writes the usual run
directory and summary once every node is done, one fails, or `--timeout-s` passes. Nothing is
written before the first node's plan agreed with this one (its section hashes, sealed with the
plan's results key): a node whose plan differs ends the collection as bad input (exit 2, one
line naming the sections), and the node, told so, sends no result. It may start
before or after the nodes: a node's records queue until a collector listens. Each node's final
parameters stay in its own host's run directory (final/). For a discover plan it also serves
the directory the nodes learn each other's addresses from (launcher/run/address_book.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq

from dfl_node.plan import PlanError, RunPlan
from dfl_node.transports.encryption import COLLECTOR, Curve, load_curve
from launcher.config.endpoints import wildcard_bind
from launcher.config.host_plan import check_place, place_plan
from launcher.errors import LaunchError
from launcher.results.cycle_metrics import CycleMetrics
from launcher.run.address_book import AddressBook
from launcher.run.collector import Collector, PlanDiffers, ZmqSource
from launcher.run.faults import interrupted
from launcher.run.finish import report, save
from launcher.run.on_failure import FailureWatch
from launcher.run.outcome import Outcome

PUMP_S = 0.5
OnRecord = Callable[[str, dict[str, Any]], None]


def open_collector(plan: RunPlan, out_dir: Path, curve: Curve | None,
                   on_record: OnRecord | None = None) -> Collector:
    """The plan's collector, listening (CURVE-secured with `curve`; every record also to
    `on_record`, a live view); a LaunchError when its port cannot be bound here."""
    address = wildcard_bind(plan.collector)
    try:
        source = ZmqSource(plan, address, curve=curve)
    except zmq.ZMQError as exc:
        raise LaunchError(f"collect: cannot listen on {address} (the plan's collector "
                          f"{plan.collector}): {exc}") from None
    return Collector(source, out_dir, plan.ids, CycleMetrics.for_plan(plan, out_dir), on_record)


def await_nodes(collector: Collector, plan: RunPlan, timeout_s: float) -> Outcome:
    """Pump records until every node is done (or, under `--on-failure continue`, dropped by
    the survivors), one reports an error (naming the neighbour it found dead, if any), or the
    timeout passes."""
    deadline = time.monotonic() + timeout_s
    watch = FailureWatch(collector, plan.wire.on_failure == "continue")
    while not set(plan.ids) <= set(collector.done) | watch.dropped():
        if (failed := watch.failure({})) is not None:  # an error, or a write refused here
            return failed
        if time.monotonic() >= deadline:
            missing = sorted(set(plan.ids) - set(collector.done))
            return Outcome(False, missing[0],
                           f"no result from nodes {missing} within {timeout_s:g} s")
        collector.pump(PUMP_S)
    collector.drain()
    return watch.success({})  # pids: the summary takes them from the done records


def collect(plan_path: Path, out_dir: Path, timeout_s: float, keys: Path | None = None) -> int:
    """Gather one mesh's results into `out_dir` (a --secure plan's collector key from `keys`,
    else from the plan's keys_dir); the exit code of `dfl-launch`."""
    if timeout_s <= 0:
        raise LaunchError(f"--timeout-s: must be positive, got {timeout_s:g}")
    try:
        plan = RunPlan.load(plan_path)
        curve = load_curve(plan, COLLECTOR, keys)
    except PlanError as exc:
        raise LaunchError(str(exc)) from None
    check_place(plan, out_dir)
    collector = open_collector(plan, out_dir, curve)
    try:
        directory = AddressBook(plan) if plan.discovery else None
    except LaunchError:
        collector.close()
        raise
    started = time.monotonic()
    print(f"collecting {len(plan.ids)} nodes of {plan.protocol} on {plan.collector}", flush=True)
    try:
        outcome = await_nodes(collector, plan, timeout_s)
    except KeyboardInterrupt as exc:
        outcome = interrupted(exc)
    except PlanDiffers as exc:  # before any record counted: nothing is written
        raise LaunchError(f"collect: {exc}") from None
    finally:
        collector.close()
        if directory is not None:
            directory.close()
            collector.rejected.update(directory.rejected)
    place_plan(plan, out_dir)  # the run directory is made once a node agreed (nothing before)
    results = save(plan, {"hyper": plan.hyper}, collector, outcome,
                   time.monotonic() - started, out_dir)
    return report(results, out_dir)
