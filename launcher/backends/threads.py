"""The inproc transport's mesh: every node a thread of this process, sharing nothing but queues.

It runs the very node code the processes run, so its `final/` files must equal theirs bit for
bit; it is the reference the exactness harness compares against.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import traceback
from functools import partial
from pathlib import Path

from dfl_node.learning.torch_settings import apply_runtime
from dfl_node.plan import RunPlan
from dfl_node.runner.prephase_client import InprocPrephaseHub
from dfl_node.runner.record_sink import QueueRecordSink
from dfl_node.runner.run_node import run_node
from dfl_node.transports.inproc import InprocHub, InprocTransport
from launcher.backends.base import LocalBackend, LocalMesh, OnRecord
from launcher.config.backend_catalog import THREADS
from launcher.results.cycle_metrics import CycleMetrics
from launcher.run.collector import Collector, QueueSource
from launcher.run.faults import io_fields, node_storage_failure
from launcher.run.outcome import Outcome
from protocols.registry import node_class

STOP_GRACE_S = 30.0
"""How long a stopped run waits for each node thread to reach its next message (a thread in a
long local epoch finishes the batch it is in first)."""


def run_threads(plan: RunPlan, run_dir: Path, collector: Collector,
                sink: queue.Queue, prephase: InprocPrephaseHub | None = None) -> Outcome:
    apply_runtime(plan.hyper)
    hub = InprocHub(plan.ids)
    failures: dict[int, str] = {}
    faults: dict[int, dict[str, str]] = {}  # storage faults, by node (launcher/run/faults.py)

    def body(node_id: int) -> None:
        transport = InprocTransport(node_id, hub, set(plan.neighbors(node_id)))
        try:
            channel = prephase.channel(node_id) if prephase else None
            run_node(plan, node_id, node_class(plan.protocol), transport,
                     QueueRecordSink(sink), run_dir, channel)
        except Exception as exc:
            if hub.stopped and failures:
                return  # stopped because another node failed: not a failure of its own
            failures[node_id] = f"{type(exc).__name__}: {exc}"  # in the order they came
            if fields := io_fields(exc):
                faults[node_id] = fields
            with contextlib.suppress(OSError):  # the run directory may be what failed
                (run_dir / "logs" / f"node-{node_id}.log").write_text(traceback.format_exc())
            # A thread that raised is a node that died alone, but no heartbeat can tell its
            # neighbours (they share its process): they would wait for its messages until
            # wire.recv_timeout_s. So the first failure ends the run at once, under either
            # --on-failure policy.
            hub.stop()

    threads = [threading.Thread(target=body, args=(i,), name=f"node-{i}", daemon=True)
               for i in plan.ids]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            collector.pump(0.1)
    except BaseException:  # Ctrl-C, SIGTERM, a fault: end the node threads before this does
        hub.stop()
        for t in threads:
            t.join(STOP_GRACE_S)
        raise
    collector.drain()
    pids = dict.fromkeys(plan.ids, os.getpid())
    storage = node_storage_failure(faults, run_dir)
    if storage is not None:
        storage.pids = pids
        return storage
    if failures:
        node_id = next(iter(failures))  # the first: the others may be what it caused
        return Outcome(False, node_id, failures[node_id], pids)
    return Outcome(True, pids=pids)


class ThreadsBackend(LocalBackend):
    """Nodes as threads of this process: records reach the collector through a queue and the
    pre-phase through an in-process hub, so nothing listens on a port."""

    spec = THREADS

    def open(self, plan: RunPlan, plan_path: Path, run_dir: Path,
             cycles: CycleMetrics | None, on_record: OnRecord) -> LocalMesh:
        hub = InprocPrephaseHub(plan.ids)
        sink: queue.Queue = queue.Queue()
        collector = Collector(QueueSource(sink), run_dir, plan.ids, cycles, on_record)
        return LocalMesh(collector, partial(run_threads, plan, run_dir, collector, sink, hub),
                         hub)
