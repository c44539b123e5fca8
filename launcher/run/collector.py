"""The launcher's collector: node records in, validated, into the run directory.

Nodes push msgpack maps (metrics at each evaluation, `done` with their ledger, `error`). Anything
that is not a well-formed record from a node of the plan is dropped and counted: the collector
listens on a real port and must not trust what arrives there. Under --secure the collector's
socket admits only the nodes' CURVE keys, and a record whose `node` is not its key's owner is
dropped as `curve_sender_mismatch`.
"""

from __future__ import annotations

import json
import queue
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgpack
import zmq

from dfl_node.transports.encryption import Curve, key_owner
from launcher.run.faults import launcher_storage_cause
from launcher.run.outcome import Cause

if TYPE_CHECKING:
    from launcher.results.cycle_metrics import CycleMetrics

MAX_RECORD_BYTES = 64 << 20
BATCH_RECORDS = 1024  # most records pump_all handles before its caller looks at exit codes again
KINDS = ("ready", "metrics", "done", "error", "params")
# A record's bytes and the node whose CURVE key sent it (None where the source cannot tell).
Arrival = tuple[bytes, int | None]


class Source(Protocol):
    def poll(self, timeout_s: float) -> Arrival | None: ...

    def close(self) -> None: ...


class ZmqSource:
    """PULL socket bound on the plan's collector address; with `curve` (--secure) a CURVE
    server that admits the nodes' keys. Unless given one, in a context of its own (also the
    ZAP handler's), ended with the source: no ZeroMQ thread outlives the run, so the next run
    of the same launcher (`--seeds`) forks its zygote from a process without one
    (launcher/backends/zygote.py)."""

    def __init__(self, address: str, context: zmq.Context | None = None,
                 curve: Curve | None = None) -> None:
        self._own: zmq.Context | None = None
        if context is None:
            context = self._own = zmq.Context()
        self._sock = context.socket(zmq.PULL)
        self._zap = curve.serve(self._sock, curve.nodes) if curve is not None else None
        self._sock.setsockopt(zmq.MAXMSGSIZE, MAX_RECORD_BYTES)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(address)

    def poll(self, timeout_s: float) -> Arrival | None:
        if not self._sock.poll(int(timeout_s * 1000), zmq.POLLIN):
            return None
        frame = self._sock.recv(copy=False)
        return frame.bytes, (key_owner(frame) if self._zap is not None else None)

    def close(self) -> None:
        self._sock.close()
        if self._zap is not None:
            self._zap.close()
        if self._own is not None:
            self._own.term()


class QueueSource:
    def __init__(self, sink: queue.Queue) -> None:
        self._sink = sink

    def poll(self, timeout_s: float) -> Arrival | None:
        try:
            return self._sink.get(timeout=timeout_s), None
        except queue.Empty:
            return None

    def close(self) -> None:
        pass


class Collector:
    def __init__(self, source: Source, run_dir: Path, ids: list[int],
                 cycles: CycleMetrics | None = None,
                 on_record: Callable[[str, dict[str, Any]], None] | None = None) -> None:
        self.source = source
        self.ids = set(ids)
        self.run_dir = run_dir
        self.metrics_path = run_dir / "metrics.jsonl"
        self._metrics = self.metrics_path.open("a", encoding="utf-8")
        self.opened = time.monotonic()
        self.opened_at = time.time()  # the same instant as Unix time, for nodes' timestamps
        self.ready_at: dict[int, float] = {}  # seconds after the collector opened
        self.done: dict[int, dict[str, Any]] = {}
        self.errors: dict[int, str] = {}
        # node -> the neighbours its error says stopped answering (launcher/run/on_failure.py)
        self.dead_reports: dict[int, list[int]] = {}
        # node -> the heartbeat intervals those neighbours had been silent when it concluded
        self.silences: dict[int, int] = {}
        # node -> the storage fault its error names (`errno`, `path`: launcher/run/faults.py)
        self.io_faults: dict[int, dict[str, str]] = {}
        # the run directory refused one of this collector's own writes: the run must end
        self.fault: Cause | None = None
        self.rejected: Counter[str] = Counter()
        # per-cycle metrics (launcher/results/cycle_metrics.py); `params` records go nowhere else
        self.cycles = cycles
        # the live view (launcher/run/progress.py): every record kept, after it is on disk
        self.on_record = on_record

    def pump(self, timeout_s: float) -> bool:
        """Handle at most one record; True if one arrived."""
        arrival = self.source.poll(timeout_s)
        if arrival is None:
            return False
        raw, sender = arrival
        record = self._validate(raw, sender)
        if record is not None:
            self._handle(record, len(raw))
        return True

    def pump_all(self, timeout_s: float) -> int:
        """Wait up to `timeout_s` for a record, then handle every record already queued (at
        most BATCH_RECORDS); how many were handled. A caller that checks its children between
        pumps does so once per batch, not once per record: with 200 nodes, checking 200 exit
        codes after each of 200 `ready` records kept records queued for tens of seconds, and
        each node's ready time was taken that late."""
        handled = 0
        while handled < BATCH_RECORDS and self.pump(timeout_s if handled == 0 else 0.0):
            handled += 1
        return handled

    def drain(self, quiet_s: float = 0.2) -> None:
        while self.pump(quiet_s):
            pass

    def _validate(self, raw: bytes, sender: int | None) -> dict[str, Any] | None:
        try:
            record = msgpack.unpackb(raw, raw=False, strict_map_key=True)
        except Exception:  # msgpack raises several unrelated types on garbage
            self.rejected["bad_msgpack"] += 1
            return None
        if not isinstance(record, dict) or record.get("type") not in KINDS:
            self.rejected["bad_record"] += 1
            return None
        node = record.get("node")
        if type(node) is not int or node not in self.ids:
            self.rejected["unknown_node"] += 1
            return None
        if sender is not None and node != sender:
            self.rejected["curve_sender_mismatch"] += 1
            return None
        problem = self._field_problem(record)
        if problem:
            self.rejected[problem] += 1
            return None
        return record

    def _field_problem(self, record: dict[str, Any]) -> str:
        """The reason a record of a plan's node is still refused ("" if none): fields its kind
        needs with the wrong type ("bad_record"), or a second `ready`/`done` of one node
        ("duplicate"), so that garbage or a replay never overwrites a node's result or breaks
        the summary."""
        kind, node = record["type"], record["node"]
        if (kind == "ready" and node in self.ready_at) or (kind == "done" and node in self.done):
            return "duplicate"
        needs = {"metrics": ("round", int), "done": ("ledger", dict), "error": ("message", str)}
        key, kind_of = needs.get(kind, ("node", int))
        value = record.get(key)
        valid = isinstance(value, kind_of) and not isinstance(value, bool)
        return "" if valid and not (isinstance(value, int) and value < 0) else "bad_record"

    def _handle(self, record: dict[str, Any], size: int) -> None:
        kind = record.pop("type")
        if kind == "params":
            if self.cycles is None or not self.cycles.on_params(record, size):
                self.rejected["unexpected_params"] += 1
            return
        if kind == "ready":
            self.ready_at[record["node"]] = time.monotonic() - self.opened
        elif kind == "metrics":
            self._write_metrics(record)
        elif kind == "done":
            self.done[record["node"]] = record
        else:
            self.errors[record["node"]] = str(record.get("message"))
            dead = record.get("dead")
            if isinstance(dead, list) and all(type(i) is int and i in self.ids for i in dead):
                self.dead_reports[record["node"]] = dead
                silent = record.get("silent_intervals")
                if type(silent) is int and silent >= 0:
                    self.silences[record["node"]] = silent
            fields = {k: record[k] for k in ("errno", "path") if isinstance(record.get(k), str)}
            if "errno" in fields:
                self.io_faults[record["node"]] = fields
        if self.on_record is not None:
            self.on_record(kind, record)

    def _write_metrics(self, record: dict[str, Any]) -> None:
        """A row into metrics.jsonl (and cycles.jsonl); a refused write is the run's `fault`,
        and no row is written after it (the run is ending)."""
        if self.fault is not None:
            return
        try:
            self._metrics.write(json.dumps(record, sort_keys=True) + "\n")
            self._metrics.flush()
        except OSError as exc:
            self.fault = launcher_storage_cause(exc, self.metrics_path, self.run_dir)
            return
        if self.cycles is not None:
            try:
                self.cycles.on_metrics(record)
            except OSError as exc:
                self.fault = launcher_storage_cause(exc, self.cycles.path, self.run_dir)

    def close(self) -> None:
        try:
            self._metrics.close()
        except OSError as exc:  # the buffered part of a refused row, written again and refused
            self.fault = self.fault or launcher_storage_cause(exc, self.metrics_path,
                                                              self.run_dir)
        self.source.close()
