"""`dfl-node`: one node of a run (or its pre-phase coordinator), in this process, on this host.

    dfl-node --plan plan.json --node-id I [--out DIR] [--keys DIR]
    dfl-node --plan plan.json --node-id-from-env SLURM_PROCID [--out DIR]
    dfl-node --topology T --protocol P --node-id I [the options of dfl-launch] [--out DIR]
    dfl-node --coordinator --plan plan.json [--out DIR] [--keys DIR]

An operator (or a container) starts nodes this way, one per host (the hand-off backends of
launcher/backends/: hosts.py, compose.py); the launcher's processes backend runs the same
`start_zmq_node` in processes forked from its forkserver (`run_launched`). With `--topology`
every host resolves the same plan itself (launcher/config/host_plan.py). Bad input, including a
plan that differs from a neighbour's or key files a --secure plan cannot use
(dfl_node/transports/encryption.py), exits 2 with one line; a failed run exits 1.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click
import zmq

from dfl_node.comm.rendezvous import RendezvousTimeout
from dfl_node.learning.torch_settings import apply_runtime
from dfl_node.plan import PlanError, RunPlan
from dfl_node.runner.context import node_logger
from dfl_node.runner.discovery import DiscoveryError, discover
from dfl_node.runner.prephase_client import ZmqPrephaseChannel
from dfl_node.runner.process_memory import share_one_arena
from dfl_node.runner.receive_caps import PEER_MESSAGES, wire_limits
from dfl_node.runner.record_sink import FileRecordSink, NoCollector, RecordSink, ZmqRecordSink
from dfl_node.runner.run_node import run_node
from dfl_node.transports.encryption import COORDINATOR, Curve, load_curve
from dfl_node.transports.liveness import Heartbeat, MeshFailure, failure_fields
from dfl_node.transports.zeromq import ZmqTransport
from launcher.config.options import run_options
from launcher.errors import LaunchError, run_cli
from launcher.logs import configure, launcher_logger
from launcher.process_table import start_time
from launcher.run.faults import io_fields
from protocols.registry import node_class

PARENT_POLL_S = 0.5
LOG = launcher_logger("node")


def start_zmq_node(plan: RunPlan, node_id: int, out_dir: Path, curve: Curve | None,
                   keep_records: bool = False) -> None:
    """Run one node over real sockets, reporting to the plan's collector (and, with
    `keep_records`, to records/node-<id>.jsonl of `out_dir` as well); with `curve` (a --secure
    plan) every socket of the node is CURVE-secured. A discover plan's node learns the others'
    addresses from the plan's directory once it listens (dfl_node/runner/discovery.py) and runs
    the plan with them filled in."""
    apply_runtime(plan.hyper)
    share_one_arena()
    # One ZeroMQ context for every socket of the node (mesh, records, pre-phase, discovery):
    # one I/O thread and one reaper instead of one pair per socket owner. Destroyed last, so
    # that it waits (each socket's linger) until what was queued is out before the node ends.
    context = zmq.Context()
    try:
        run_sockets(plan, node_id, out_dir, curve, keep_records, context)
    finally:
        context.destroy()


def run_sockets(plan: RunPlan, node_id: int, out_dir: Path, curve: Curve | None,
                keep_records: bool, context: zmq.Context) -> None:
    """`start_zmq_node`'s run, every socket in `context`."""
    given = plan  # the plan as loaded: the collector holds it without discovered addresses
    entry = plan.node(node_id)
    node_logger(node_id).info("node %d pid %d binds %s device %s", node_id, os.getpid(),
                              entry.bind, entry.device)
    found: list[RunPlan] = []

    def learn_peers(bound: str) -> dict[int, str]:
        """A discover plan's node addresses, once this node listens (the plan with them on)."""
        found.append(discover(plan, node_id, bound, plan.wire.rendezvous_seconds,
                              context))
        return {j: found[0].node(j).address for j in plan.neighbors(node_id)}

    peers = {} if plan.discovery else {j: plan.node(j).address for j in plan.neighbors(node_id)}
    limits = wire_limits(plan)
    transport = ZmqTransport(node_id, entry.bind, peers,
                             hwm=plan.wire.hwm, peer_messages=PEER_MESSAGES,
                             max_message_bytes=limits.max_frame_bytes, curve=curve,
                             heartbeat=Heartbeat.of(plan.wire, host_crowd(plan, entry.host)),
                             discover=learn_peers if plan.discovery else None,
                             context=context)
    plan = found[0] if found else plan
    sink: RecordSink = ZmqRecordSink(given, node_id, curve=curve, context=context)
    if keep_records:
        sink = FileRecordSink(out_dir / "records" / f"node-{node_id}.jsonl", sink)
    prephase = (ZmqPrephaseChannel(node_id, plan.prephase.address, plan.prephase.max_bytes,
                                   curve, context)
                if plan.prephase else None)
    failed = True
    try:
        run_node(plan, node_id, node_class(plan.protocol), transport, sink, out_dir,
                 prephase)
        failed = False
    except Exception as exc:
        sink.emit({"type": "error", "node": node_id, "message": f"{type(exc).__name__}: {exc}",
                       **failure_fields(exc), **io_fields(exc)})
        transport.close()  # lets what is queued go out: a refusing node's plan hashes, say
        raise
    finally:
        if prephase is not None:
            prephase.close()
        try:
            sink.close()  # the collector refused the plan (PlanError) or never answered
        except (PlanError, NoCollector):
            if not failed:  # else the run's own error is the one to report
                raise


def host_crowd(plan: RunPlan, host: str) -> float:
    """Node processes of the plan on `host` per core of this machine (the liveness deadline
    stretches with it)."""
    return sum(1 for node in plan.nodes if node.host == host) / (os.cpu_count() or 1)


def exit_with_launcher(pid: int) -> None:
    """Exit within PARENT_POLL_S once the launcher `pid` is gone, so a killed launcher leaves
    no node behind. (The forkserver between them outlives the launcher while any node runs, so
    the node must watch the launcher itself.)"""
    started = start_time(pid)

    def loop() -> None:
        while started is not None and start_time(pid) == started:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=loop, name="launcher-watch", daemon=True).start()


def run_launched(plan_path: str, node_id: int, run_dir: str, launcher_pid: int) -> None:
    """Entry of a launcher-forked node: log to logs/node-<id>.log, leave Ctrl-C to the launcher."""
    log = os.open(Path(run_dir) / "logs" / f"node-{node_id}.log",
                  os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    # The Python streams too: a launcher in a Jupyter kernel (or under pytest) has replaced
    # sys.stdout with its own object, which a forked node would otherwise keep writing to.
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 (the node's life)
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    configure("dfl-node", info_on_stdout=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_launcher(launcher_pid)
    plan = RunPlan.load(Path(plan_path))
    start_zmq_node(plan, node_id, Path(run_dir), load_curve(plan, node_id))


EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
# Spelling of the run options whose flag is not their parameter's name.
FLAGS = {"sets": "--set", "config_file": "--config"}


def host_plan(plan_path: Path | None, run: dict[str, Any], out_dir: Path | None,
              node_id: int | None) -> tuple[RunPlan, Path]:
    """The plan this host runs (node `node_id`, or the coordinator when None) and its run
    directory, with this host's data ready for it."""
    from launcher.config import host_plan as hostplan
    from launcher.config.keys import RESULTS_KEY, read_results_key
    from launcher.config.options import command_line_spec
    from launcher.data.prepare import ensure_host_data
    from launcher.run import directory  # the launcher's resolution code, not in the node path

    given = [FLAGS.get(k, "--" + k.replace("_", "-")) for k, v in run.items()
             if v not in (None, ()) and k not in ("data_root", "keys")]
    if plan_path is not None and given:
        raise LaunchError(f"{given[0]}: the plan fixes it; give --plan or --topology, not both")
    if plan_path is None and not run["topology"]:
        raise LaunchError("give --plan PLAN, or --topology T --protocol P")
    if plan_path is not None:
        plan = RunPlan.load(plan_path)
        out = out_dir or plan_path.parent
    else:
        plan = hostplan.resolve_host_plan(command_line_spec(run))
        if run["keys"] is None or read_results_key(Path(run["keys"])) is None:
            raise LaunchError("--topology: each host draws its own results key unless --keys "
                              f"DIR holds the run's ({RESULTS_KEY}, made by dfl-launch keys; "
                              "give dfl-launch plan the same --keys), or give --plan PLAN")
        out = out_dir or directory.default_run_dir(plan.protocol, plan.topology_name)
    if node_id is not None:
        plan.node(node_id)
    elif not plan.prephase:
        raise LaunchError(f"--coordinator: protocol {plan.protocol} has no pre-phase")
    ensure_host_data(plan, run["data_root"])
    hostplan.place_plan(plan, out)
    return plan, out


def run_here(plan: RunPlan, node_id: int, out_dir: Path, curve: Curve | None) -> int:
    """One node to the end; a plan that differs from a neighbour's is bad input (one line)."""
    try:
        start_zmq_node(plan, node_id, out_dir, curve, keep_records=True)
    except PlanError as exc:
        LOG.error("%s", exc)
        return EXIT_BAD_INPUT
    except (RendezvousTimeout, MeshFailure, DiscoveryError, NoCollector) as exc:
        LOG.error("%s", exc)
        return EXIT_FAILED
    return EXIT_OK


def coordinate_here(plan: RunPlan, out_dir: Path, curve: Curve | None) -> int:
    """The pre-phase coordinator; prephase.json lands in `out_dir`."""
    from launcher.run.prephase_coordinator import coordinate_alone

    try:
        coordinate_alone(plan, out_dir, curve)
    except Exception as exc:  # the nodes heard the reason; the operator gets one line
        LOG.error("pre-phase: %s: %s", type(exc).__name__, exc)
        return EXIT_FAILED
    print(f"pre-phase done: {out_dir / 'prephase.json'}", flush=True)
    return EXIT_OK


def node_from_env(plan_path: Path | None, variable: str) -> int:
    """The id of the node a scheduler's task is: the plan's node at the index `variable` holds
    (a task's rank, 0 to N-1, whatever ids the topology uses)."""
    if plan_path is None:
        raise LaunchError("--node-id-from-env: give --plan PLAN (the ids are the plan's)")
    text = os.environ.get(variable)
    ids = RunPlan.load(plan_path).ids
    if text is None or not text.isdigit() or int(text) >= len(ids):
        raise LaunchError(f"--node-id-from-env {variable}: expected an index 0..{len(ids) - 1} "
                          f"of the plan's nodes, got {text!r}")
    return ids[int(text)]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--plan", "plan_path", type=click.Path(path_type=Path), default=None,
              help="plan.json written by dfl-launch (or dfl-launch plan).")
@click.option("--node-id", type=int, default=None, help="Which node of the plan to run.")
@click.option("--node-id-from-env", "node_id_env", default=None, metavar="VAR",
              help="Run the node whose index in the plan (0-based, in id order) is the value "
                   "of environment variable VAR (SLURM_PROCID in a Slurm job).")
@click.option("--coordinator", is_flag=True,
              help="Play the plan's pre-phase coordinator instead of a node.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="This host's run directory (default: the plan's directory; with --topology "
                   "runs/<timestamp>-<protocol>-<topology>).")
@run_options
def cli(plan_path: Path | None, node_id: int | None, node_id_env: str | None,
        coordinator: bool, out_dir: Path | None, **run: Any) -> None:
    """Run one node of a dfl-mesh plan, or its pre-phase coordinator, on this host."""
    if [coordinator, node_id is not None, node_id_env is not None].count(True) != 1:
        raise LaunchError("give exactly one of --node-id I and --coordinator (or "
                          "--node-id-from-env VAR for --node-id)")
    try:
        if node_id_env is not None:
            node_id = node_from_env(plan_path, node_id_env)
        plan, out = host_plan(plan_path, run, out_dir, node_id)
        # a plan of --topology has its keys_dir from --keys already; --plan's may move
        keys = run["keys"] if plan_path is not None else None
        curve = load_curve(plan, COORDINATOR if node_id is None else node_id, keys)
    except PlanError as exc:
        raise LaunchError(str(exc)) from None
    sys.exit(coordinate_here(plan, out, curve) if node_id is None
             else run_here(plan, node_id, out, curve))


def main() -> None:
    run_cli(cli, "dfl-node", info_on_stdout=True)


if __name__ == "__main__":
    main()
