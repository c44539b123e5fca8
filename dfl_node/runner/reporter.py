"""Where a node's metrics go: the launcher's collector over ZeroMQ, or a queue in-process.

Records are flat msgpack maps of strings, numbers and nested maps; the collector validates them
before use, so a node never sends anything that needs pickle.
"""

from __future__ import annotations

import base64
import json
import queue
from pathlib import Path
from typing import Any, Protocol

import msgpack
import zmq

from dfl_node.transports.encryption import COLLECTOR, Curve


class Reporter(Protocol):
    def emit(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class ZmqReporter:
    """PUSH to the collector's PULL: one-way, and queued until the collector is up.

    It owns its context so that `close()` can wait (up to the linger) until every queued record
    is out: a launcher-forked node ends with os._exit, which would drop them otherwise. With
    `curve` (--secure) it is a CURVE client of the collector's key.
    """

    def __init__(self, address: str, linger_ms: int = 10_000, curve: Curve | None = None) -> None:
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.PUSH)
        self._sock.setsockopt(zmq.LINGER, linger_ms)
        if curve is not None:
            curve.client(self._sock, curve.services[COLLECTOR])
        self._sock.connect(address)

    def emit(self, record: dict[str, Any]) -> None:
        self._sock.send(msgpack.packb(record, use_bin_type=True))

    def close(self) -> None:
        self._sock.close()
        self._ctx.term()


class QueueReporter:
    """The in-process twin: records go straight into the collector's queue."""

    def __init__(self, sink: queue.Queue) -> None:
        self._sink = sink

    def emit(self, record: dict[str, Any]) -> None:
        self._sink.put(msgpack.packb(record, use_bin_type=True))

    def close(self) -> None:
        pass


class FileReporter:
    """Records as JSON lines in a file of this host's run directory, beside the stream to the
    collector: a node on its own host keeps its part of the results even when no collector
    listened. Raw bytes (a `params` record's tensors) are written as base64 text."""

    def __init__(self, path: Path, then: Reporter) -> None:
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
