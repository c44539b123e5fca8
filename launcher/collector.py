"""The launcher's collector: node records in, validated, into the run directory.

Nodes push msgpack maps (metrics at each evaluation, `done` with their ledger, `error`). Anything
that is not a well-formed record from a node of the plan is dropped and counted: the collector
listens on a real port and must not trust what arrives there.
"""

from __future__ import annotations

import json
import queue
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgpack
import zmq

if TYPE_CHECKING:
    from launcher.cycle_metrics import CycleMetrics

MAX_RECORD_BYTES = 64 << 20
KINDS = ("ready", "metrics", "done", "error", "params")


class Source(Protocol):
    def poll(self, timeout_s: float) -> bytes | None: ...

    def close(self) -> None: ...


class ZmqSource:
    """PULL socket bound on the plan's collector address."""

    def __init__(self, address: str, context: zmq.Context | None = None) -> None:
        self._sock = (context or zmq.Context.instance()).socket(zmq.PULL)
        self._sock.setsockopt(zmq.MAXMSGSIZE, MAX_RECORD_BYTES)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(address)

    def poll(self, timeout_s: float) -> bytes | None:
        if self._sock.poll(int(timeout_s * 1000), zmq.POLLIN):
            return self._sock.recv()
        return None

    def close(self) -> None:
        self._sock.close()


class QueueSource:
    def __init__(self, sink: queue.Queue) -> None:
        self._sink = sink

    def poll(self, timeout_s: float) -> bytes | None:
        try:
            return self._sink.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def close(self) -> None:
        pass


class Collector:
    def __init__(self, source: Source, run_dir: Path, ids: list[int],
                 cycles: CycleMetrics | None = None) -> None:
        self.source = source
        self.ids = set(ids)
        self.metrics_path = run_dir / "metrics.jsonl"
        self._metrics = self.metrics_path.open("a", encoding="utf-8")
        self.opened = time.monotonic()
        self.ready_at: dict[int, float] = {}  # seconds after the collector opened
        self.done: dict[int, dict[str, Any]] = {}
        self.errors: dict[int, str] = {}
        self.rejected: Counter[str] = Counter()
        # per-cycle metrics (launcher/cycle_metrics.py); `params` records go nowhere else
        self.cycles = cycles

    def pump(self, timeout_s: float) -> bool:
        """Handle at most one record; True if one arrived."""
        raw = self.source.poll(timeout_s)
        if raw is None:
            return False
        record = self._validate(raw)
        if record is not None:
            self._handle(record, len(raw))
        return True

    def drain(self, quiet_s: float = 0.2) -> None:
        while self.pump(quiet_s):
            pass

    def _validate(self, raw: bytes) -> dict[str, Any] | None:
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
        return record

    def _handle(self, record: dict[str, Any], size: int) -> None:
        kind = record.pop("type")
        if kind == "params":
            if self.cycles is None or not self.cycles.on_params(record, size):
                self.rejected["unexpected_params"] += 1
            return
        if kind == "ready":
            self.ready_at[record["node"]] = time.monotonic() - self.opened
        elif kind == "metrics":
            self._metrics.write(json.dumps(record, sort_keys=True) + "\n")
            self._metrics.flush()
            if self.cycles is not None:
                self.cycles.on_metrics(record)
        elif kind == "done":
            self.done[record["node"]] = record
        else:
            self.errors[record["node"]] = str(record.get("message"))

    def close(self) -> None:
        self._metrics.close()
        self.source.close()
