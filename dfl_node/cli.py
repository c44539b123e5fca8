"""`dfl-node --plan plan.json --node-id I`: one node of a run, in this process.

An operator (or a container) starts nodes this way on other hosts; the launcher runs the same
`start_zmq_node` in processes forked from its forkserver (`run_launched`). Bad input exits 2 with
one line; a failed run exits 1.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import click
import torch

from dfl_node.node import run_node
from dfl_node.plan import PlanError, RunPlan
from dfl_node.report import ZmqReporter
from dfl_node.transport_zmq import ZmqTransport

PARENT_POLL_S = 0.5


def start_zmq_node(plan: RunPlan, node_id: int, out_dir: Path) -> None:
    """Run one node over real sockets, reporting to the plan's collector."""
    torch.set_num_threads(int(plan.hyper.get("torch_threads", 1)))
    entry = plan.node(node_id)
    print(f"node {node_id} pid {os.getpid()} binds {entry.bind} device {entry.device}", flush=True)
    peers = {j: plan.node(j).address for j in plan.neighbors(node_id)}
    transport = ZmqTransport(node_id, entry.bind, peers,
                             hwm=int(plan.wire["hwm"]),
                             max_message_bytes=int(plan.wire["max_message_bytes"]))
    reporter = ZmqReporter(plan.collector)
    try:
        run_node(plan, node_id, transport, reporter, out_dir)
    except Exception as exc:
        reporter.emit({"type": "error", "node": node_id, "message": f"{type(exc).__name__}: {exc}"})
        raise
    finally:
        reporter.close()


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (None once it is gone): a pid plus this names one
    process even if the pid is later reused."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def exit_with_launcher(pid: int) -> None:
    """Exit within PARENT_POLL_S once the launcher `pid` is gone, so a killed launcher leaves
    no node behind. (The forkserver between them outlives the launcher while any node runs, so
    the node must watch the launcher itself.)"""
    started = process_start_time(pid)

    def loop() -> None:
        while started is not None and process_start_time(pid) == started:
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
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_launcher(launcher_pid)
    start_zmq_node(RunPlan.load(Path(plan_path)), node_id, Path(run_dir))


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--plan", "plan_path", required=True, type=click.Path(path_type=Path),
              help="plan.json written by dfl-launch (or dfl-launch plan).")
@click.option("--node-id", required=True, type=int, help="Which node of the plan to run.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Run directory for final/ (default: the plan's directory).")
def cli(plan_path: Path, node_id: int, out_dir: Path | None) -> None:
    """Run one node of a dfl-mesh plan."""
    try:
        plan = RunPlan.load(plan_path)
        plan.node(node_id)
    except PlanError as exc:
        click.echo(f"dfl-node: {exc}", err=True)
        sys.exit(2)
    start_zmq_node(plan, node_id, out_dir or plan_path.parent)


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.ClickException as exc:
        click.echo(f"dfl-node: {exc.format_message()}", err=True)
        sys.exit(2)
    except (KeyboardInterrupt, click.Abort):
        sys.exit(130)


if __name__ == "__main__":
    main()
