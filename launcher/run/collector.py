"""The launcher's collector: node records in, validated, into the run directory.

Nodes send msgpack maps (metrics at each evaluation, `done` with their ledger, `error`). Anything
that is not a well-formed record from a node of the plan is dropped and counted (`rejected_records`
in summary.json): the collector listens on a real port and must not trust what arrives there.
Over ZeroMQ a record counts only when sealed with the plan's results key, after its node's plan
agreed with the collector's (ZmqSource; dfl_node/runner/results_seal.py), in every run, with or
without --secure. Under --secure the collector's socket also admits only the nodes' CURVE keys,
and a record whose `node` is not its key's owner is dropped as `curve_sender_mismatch`.
"""

from __future__ import annotations

import json
import queue
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

import msgpack
import zmq
from pydantic import BaseModel, ValidationError

from dfl_node.plan import PlanError, RunPlan
from dfl_node.runner.records import DoneRecord, MetricsRecord, ReadyRecord
from dfl_node.runner.results_seal import (
    HELLO,
    MAX_RECORD_BYTES,
    RECORD,
    VERDICT,
    SequenceClock,
    Unsealed,
    differing,
    results_key,
    seal,
    unseal,
)
from dfl_node.transports.encryption import Curve, key_owner
from launcher import stop_signals
from launcher.config.endpoints import wildcard_bind
from launcher.run.faults import launcher_storage_cause
from launcher.run.outcome import Cause

if TYPE_CHECKING:
    from launcher.results.cycle_metrics import CycleMetrics

BATCH_RECORDS = 1024  # most records pump_all handles before its caller looks at exit codes again
KINDS = ("ready", "metrics", "done", "error", "params")
RECORD_MODELS: dict[str, type[BaseModel]] = {
    "ready": ReadyRecord, "metrics": MetricsRecord, "done": DoneRecord}
VERDICT_LINGER_MS = 2000  # a refusing collector's last verdict still goes out before it exits
# A record's bytes and the node whose CURVE key sent it (None where the source cannot tell).
Arrival = tuple[bytes | memoryview, int | None]
# Or the reason a source itself dropped what arrived (a record without the run's seal, say).
Refused = str


class Source(Protocol):
    def poll(self, timeout_s: float) -> Arrival | Refused | None: ...

    def close(self) -> None: ...


class PlanDiffers(PlanError):
    """A node's plan is not the collector's; the message (one line) names the sections."""


class ZmqSource:
    """ROUTER bound on the plan's collector address, taking only messages sealed with the
    plan's results key (dfl_node/runner/results_seal.py) from nodes of the plan, each with a
    sequence number above the last one that node sent; with `curve` (--secure) a CURVE server
    that admits the nodes' keys. A node's HELLO is answered with a verdict on its plan's
    section hashes; its records count only after an agreeing one (`unannounced` before), and a
    HELLO whose hashes differ raises PlanDiffers: a collector never writes the results of
    another plan. Unless given one, in a context of its own (also the ZAP handler's), ended
    with the source: no ZeroMQ thread outlives the run, so the next run of the same launcher
    (`--seeds`) forks its zygote from a process without one (launcher/backends/zygote.py)."""

    def __init__(self, plan: RunPlan, address: str | None = None,
                 context: zmq.Context | None = None, curve: Curve | None = None) -> None:
        self._key = results_key(plan)
        self._hashes = plan.section_hashes()
        self._ids = set(plan.ids)
        self._last_seq: dict[int, int] = {}
        self._agreed: set[int] = set()
        self._seq = SequenceClock()
        self._own: zmq.Context | None = None
        if context is None:
            context = self._own = zmq.Context()
        self._sock = context.socket(zmq.ROUTER)
        self._zap = curve.serve(self._sock, curve.nodes) if curve is not None else None
        self._sock.setsockopt(zmq.MAXMSGSIZE, MAX_RECORD_BYTES)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(address or wildcard_bind(plan.collector))

    def poll(self, timeout_s: float) -> Arrival | Refused | None:
        deadline = time.monotonic() + timeout_s
        while self._sock.poll(max(int((deadline - time.monotonic()) * 1000), 0), zmq.POLLIN):
            taken = self._take(self._sock.recv_multipart(copy=False))
            if taken is not None:
                return taken
        return None

    def _take(self, frames: list[zmq.Frame]) -> Arrival | Refused | None:
        """A sealed record of an agreed node, or the reason it is refused; None for a HELLO,
        answered here."""
        identity, *parts = frames
        message = unseal(self._key, parts[0].buffer) if len(parts) == 1 else None
        if message is None:
            return "unauthenticated"
        if message.node not in self._ids:
            return "unknown_node"
        if message.seq <= self._last_seq.get(message.node, -1):
            return "replayed"
        self._last_seq[message.node] = message.seq
        sender = key_owner(parts[0]) if self._zap is not None else None
        if sender is not None and sender != message.node:
            return "curve_sender_mismatch"
        if message.kind == HELLO:
            return self._hello(identity, message)
        if message.kind != RECORD:
            return "bad_record"
        if message.node not in self._agreed:
            return "unannounced"
        return message.body, sender

    def _hello(self, identity: zmq.Frame, message: Unsealed) -> Refused | None:
        """Answer a node's HELLO with the verdict on its plan; PlanDiffers if it differs."""
        try:
            hello = msgpack.unpackb(message.body, raw=False)
        except Exception:  # msgpack raises several unrelated types on garbage
            return "bad_record"
        nonce = hello.get("nonce") if isinstance(hello, dict) else None
        if not isinstance(nonce, bytes):
            return "bad_record"
        differ = differing(self._hashes, hello.get("hashes"))
        verdict = msgpack.packb({"nonce": nonce, "differ": differ}, use_bin_type=True)
        self._sock.send_multipart([identity, seal(self._key, message.node, self._seq.next(),
                                                  VERDICT, verdict)])
        if differ:
            self._sock.setsockopt(zmq.LINGER, VERDICT_LINGER_MS)
            raise PlanDiffers(f"node {message.node}'s plan differs in {differ} from this "
                              "collector's; refusing to collect its results")
        self._agreed.add(message.node)
        return None

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
        self._metrics: IO[str] | None = None  # opened by the first metrics record it keeps
        self.opened = time.monotonic()
        self.opened_at = time.time()  # the same instant as Unix time, for nodes' timestamps
        self.ready_at: dict[int, float] = {}  # seconds after the collector opened
        self.done: dict[int, DoneRecord] = {}
        self.errors: dict[int, str] = {}
        # node -> the neighbours its error says stopped answering (launcher/run/on_failure.py)
        self.dead_reports: dict[int, list[int]] = {}
        # node -> the heartbeat intervals those neighbours had been silent when it concluded
        self.silences: dict[int, int] = {}
        # node -> the storage fault its error names (`errno`, `path`: launcher/run/faults.py)
        self.io_faults: dict[int, dict[str, str]] = {}
        # the run directory refused one of this collector's own writes: the run must end
        self.fault: Cause | None = None
        # every socket's refusals of the run (a launcher adds the coordinator's), and the
        # records this collector refused (`rejected_records` in summary.json)
        self.rejected: Counter[str] = Counter()
        self.rejected_records: Counter[str] = Counter()
        # per-cycle metrics (launcher/results/cycle_metrics.py); `params` records go nowhere else
        self.cycles = cycles
        # the live view (launcher/run/progress.py): every record kept, after it is on disk
        self.on_record = on_record

    def _refuse(self, reason: str) -> None:
        self.rejected[reason] += 1
        self.rejected_records[reason] += 1

    def pump(self, timeout_s: float) -> bool:
        """Handle at most one record; True if one arrived. A stop signal that freeing a
        received frame dropped is raised here (launcher/stop_signals.py)."""
        stop_signals.raise_if_swallowed()
        arrival = self.source.poll(timeout_s)
        if arrival is None:
            return False
        if isinstance(arrival, str):
            self._refuse(arrival)
            return True
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

    def _validate(self, raw: bytes | memoryview, sender: int | None) -> dict[str, Any] | None:
        try:
            record = msgpack.unpackb(raw, raw=False, strict_map_key=True)
        except Exception:  # msgpack raises several unrelated types on garbage
            self._refuse("bad_msgpack")
            return None
        if not isinstance(record, dict) or record.get("type") not in KINDS:
            self._refuse("bad_record")
            return None
        node = record.get("node")
        if type(node) is not int or node not in self.ids:
            self._refuse("unknown_node")
            return None
        if sender is not None and node != sender:
            self._refuse("curve_sender_mismatch")
            return None
        problem = self._field_problem(record)
        if problem:
            self._refuse(problem)
            return None
        return record

    def _field_problem(self, record: dict[str, Any]) -> str:
        """The reason a record of a plan's node is still refused ("" if none): a record that
        does not fit its kind's model (dfl_node/runner/records.py) or an error without its
        message ("bad_record"), or a second `ready`/`done` of one node ("duplicate"), so that
        garbage or a replay never overwrites a node's result or breaks the summary."""
        kind, node = record["type"], record["node"]
        if (kind == "ready" and node in self.ready_at) or (kind == "done" and node in self.done):
            return "duplicate"
        model = RECORD_MODELS.get(kind)
        if model is not None:
            try:
                model.model_validate(record)
            except ValidationError:
                return "bad_record"
            return ""
        needs = {"error": ("message", str)}
        key, kind_of = needs.get(kind, ("node", int))
        value = record.get(key)
        valid = isinstance(value, kind_of) and not isinstance(value, bool)
        return "" if valid and not (isinstance(value, int) and value < 0) else "bad_record"

    def _handle(self, record: dict[str, Any], size: int) -> None:
        kind = record.pop("type")
        if kind == "params":
            if self.cycles is None or not self.cycles.on_params(record, size):
                self._refuse("unexpected_params")
            return
        if kind == "ready":
            self.ready_at[record["node"]] = time.monotonic() - self.opened
        elif kind == "metrics":
            self._write_metrics(record)
        elif kind == "done":
            self.done[record["node"]] = DoneRecord.model_validate(record)
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
            if self._metrics is None:  # the run directory of `collect` is made only now
                self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
                self._metrics = self.metrics_path.open("a", encoding="utf-8")
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
            if self._metrics is not None:
                self._metrics.close()
        except OSError as exc:  # the buffered part of a refused row, written again and refused
            self.fault = self.fault or launcher_storage_cause(exc, self.metrics_path,
                                                              self.run_dir)
        self.source.close()
