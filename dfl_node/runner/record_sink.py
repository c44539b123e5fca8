"""Where a node's metrics go: the launcher's collector over ZeroMQ, or a queue in-process.

Records are flat msgpack maps of strings, numbers and nested maps; the collector validates them
before use, so a node never sends anything that needs pickle. Over ZeroMQ each is sealed with the
run's results key, after the collector agreed to this node's plan (dfl_node/runner/
results_seal.py); in-process they go straight into the collector's queue.
"""

from __future__ import annotations

import base64
import json
import queue
import secrets
import time
from pathlib import Path
from typing import Any, Protocol

import msgpack
import zmq

from dfl_config.errors import DflMeshError
from dfl_node.plan import PlanError, RunPlan
from dfl_node.runner.results_seal import (
    HELLO,
    MAX_RECORD_BYTES,
    NONCE_BYTES,
    RECORD,
    VERDICT,
    SequenceClock,
    results_key,
    seal,
    unseal,
)
from dfl_node.transports.encryption import COLLECTOR, Curve

MAX_VERDICT_BYTES = 1 << 16  # a verdict is a nonce and a few section names


class NoCollector(TimeoutError, DflMeshError):
    """No collector answered a node's HELLO before it closed; the message is one line."""


class RecordSink(Protocol):
    def emit(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class ZmqRecordSink:
    """DEALER to the collector's ROUTER: records queued until the collector is up, every one
    sealed with the plan's results key (dfl_node/runner/results_seal.py).

    The first message is a HELLO with this node's plan hashes; records are held here until the
    collector's verdict agrees, then sent in order. A verdict that names differing sections
    raises PlanError (one line) from the `emit` or `close` that reads it: a node never sends
    results to a collector of another plan, and says so. `close()` waits for a verdict still
    due, and raises NoCollector if none came: the records never left this node (a kept copy is
    in records/node-<id>.jsonl, FileRecordSink). After a run that ended it waits as long as
    the plan's start-up patience (wire.rendezvous_s): where nodes are started by hand, the
    collector may come up after a short run has ended, and a node that gave up on it sooner
    would fail a run whose collector came within the time the mesh itself allows for
    starting. After an `error` record it waits the linger only: a node that failed (a plan
    refused at start, say) exits with its one line soon, whether its error reached a collector
    or not.

    `close()` must see every queued record out (up to the linger) before the node ends: a
    launcher-forked node ends with os._exit, which would drop them otherwise. Its own context
    waits for that in `close()`; a node's shared `context` (one ZeroMQ context, hence one I/O
    thread, per node) waits for it where its owner terminates it, after this close. With
    `curve` (--secure) it is a CURVE client of the collector's key.
    """

    def __init__(self, plan: RunPlan, node_id: int, linger_ms: int = 10_000,
                 curve: Curve | None = None, context: zmq.Context | None = None) -> None:
        self._key = results_key(plan)
        self._node = node_id
        self._address = plan.collector
        self._patience_s = plan.wire.rendezvous_seconds
        self._linger_s = linger_ms / 1000
        self._failed = False  # an `error` record was emitted
        self._seq = SequenceClock()
        self._nonce = secrets.token_bytes(NONCE_BYTES)
        self._held: list[bytes] = []
        self._agreed = False
        self._refused = ""  # the one line of a differing verdict, once read
        self._own_ctx = context is None
        self._ctx = zmq.Context() if context is None else context
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, linger_ms)
        self._sock.setsockopt(zmq.MAXMSGSIZE, MAX_VERDICT_BYTES)
        if curve is not None:
            curve.client(self._sock, curve.services[COLLECTOR])
        self._sock.connect(plan.collector)
        self._send(HELLO, {"type": "hello", "node": node_id, "nonce": self._nonce,
                           "hashes": plan.section_hashes()})

    def emit(self, record: dict[str, Any]) -> None:
        self._failed = self._failed or record.get("type") == "error"
        if self._refused:
            return  # the node is stopping on it already
        sealed = self._sealed(RECORD, record)
        self._read_verdict(0)
        if self._agreed:
            self._sock.send(sealed)
        else:
            self._held.append(sealed)

    def close(self) -> None:
        """Send what is held once the verdict agrees, waiting for one still due (the plan's
        start-up patience, or the linger after an error); PlanError if the collector's plan
        differs, NoCollector if no verdict came."""
        try:
            if not self._agreed and not self._refused:
                wait_s, knob = ((self._linger_s, "the linger") if self._failed
                                else (self._patience_s, "wire.rendezvous_s"))
                self._read_verdict(int(wait_s * 1000))
                if not self._agreed:
                    raise NoCollector(
                        f"node {self._node}: no collector at {self._address} agreed to the "
                        f"plan within {wait_s:g} s ({knob}); {len(self._held)} record(s) "
                        "were not sent")
        finally:
            self._sock.close()
            if self._own_ctx:
                self._ctx.term()

    def _sealed(self, kind: int, record: dict[str, Any]) -> bytes:
        """The record sealed; a ValueError for one the collector's socket would drop unread."""
        body = msgpack.packb(record, use_bin_type=True)
        if len(body) > MAX_RECORD_BYTES:
            raise ValueError(f"node {self._node}: a {record.get('type')} record of "
                             f"{len(body)} bytes is over the collector's {MAX_RECORD_BYTES}")
        return seal(self._key, self._node, self._seq.next(), kind, body)

    def _send(self, kind: int, record: dict[str, Any]) -> None:
        self._sock.send(self._sealed(kind, record))

    def _read_verdict(self, timeout_ms: int) -> None:
        """Take the collector's verdict if it is here (waiting up to `timeout_ms`); anything
        else on the socket, not sealed by the collector of this run, is ignored."""
        deadline = time.monotonic() + timeout_ms / 1000
        while not self._agreed and self._sock.poll(
                max(int((deadline - time.monotonic()) * 1000), 0), zmq.POLLIN):
            message = unseal(self._key, self._sock.recv())
            if message is None or message.kind != VERDICT or message.node != self._node:
                continue
            try:
                verdict = msgpack.unpackb(message.body, raw=False)
            except Exception:  # msgpack raises several unrelated types on garbage
                continue
            if not isinstance(verdict, dict) or verdict.get("nonce") != self._nonce:
                continue
            differ = verdict.get("differ")
            if differ:
                self._refused = (f"node {self._node}: the collector's plan differs in "
                                 f"{differ}; refusing to send it results")
                self._held.clear()
                raise PlanError(self._refused)
            self._agreed = True
            for sealed in self._held:
                self._sock.send(sealed)
            self._held.clear()


class QueueRecordSink:
    """The in-process twin: records go straight into the collector's queue."""

    def __init__(self, sink: queue.Queue) -> None:
        self._sink = sink

    def emit(self, record: dict[str, Any]) -> None:
        self._sink.put(msgpack.packb(record, use_bin_type=True))

    def close(self) -> None:
        pass


class FileRecordSink:
    """Records as JSON lines in a file of this host's run directory, beside the stream to the
    collector: a node on its own host keeps its part of the results even when no collector
    listened. Raw bytes (a `params` record's tensors) are written as base64 text."""

    def __init__(self, path: Path, then: RecordSink) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")
        self._then = then

    def emit(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record, sort_keys=True, default=_base64) + "\n")
        self._file.flush()
        self._then.emit(record)

    def close(self) -> None:
        self._file.close()
        self._then.close()


def _base64(value: Any) -> str:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def params_due(every: int, eval_every: int, rounds: int, round_: int) -> bool:
    """Whether the evaluation after round `round_` (1-based) also sends the parameters
    (`cycle_metrics.params_every`: 0 never; k at rounds that are multiples of k, and the last)."""
    evaluated = round_ % eval_every == 0 or round_ == rounds
    return every > 0 and evaluated and (round_ % every == 0 or round_ == rounds)


def params_record(node: int, round_: int, state: dict[str, Any]) -> dict[str, Any]:
    """A `params` record: every float32 tensor of the model's state as raw little-endian bytes.
    It travels on the metrics channel (control traffic), never over the mesh, and the collector
    checks names and sizes against its own copy of the model before reading it."""
    tensors = {name: t.detach().cpu().contiguous().numpy().astype("<f4", copy=False).tobytes()
               for name, t in state.items() if t.is_floating_point()}
    return {"type": "params", "node": node, "round": round_, "tensors": tensors}
