"""Where a node's metrics go: the launcher's collector over ZeroMQ, or a queue in-process.

Records are flat msgpack maps of strings, numbers and nested maps; the collector validates them
before use, so a node never sends anything that needs pickle.
"""

from __future__ import annotations

import queue
from typing import Any, Protocol

import msgpack
import zmq


class Reporter(Protocol):
    def emit(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class ZmqReporter:
    """PUSH to the collector's PULL: one-way, and queued until the collector is up.

    It owns its context so that `close()` can wait (up to the linger) until every queued record
    is out: a launcher-forked node ends with os._exit, which would drop them otherwise.
    """

    def __init__(self, address: str, linger_ms: int = 10_000) -> None:
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.PUSH)
        self._sock.setsockopt(zmq.LINGER, linger_ms)
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
