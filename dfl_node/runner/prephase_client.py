"""The node side of a one-time pre-phase: one report to the coordinator, one answer back.

Some protocols (SSD-FL's cluster formation) need a coordinator once before training: every node
sends it a report, the coordinator (the launcher, or another process that plays it) computes
something global and answers each node. The runtime knows no protocol: a report and an answer
are opaque named arrays, carried in the wire codec's format (a msgpack header plus raw frames,
nothing unpickled) and checked by `decode` against size caps before anything is read; what the
arrays mean is validated by the protocol on both ends.

Channels: over ZeroMQ a node connects a DEALER (routing id = its node id, as on the mesh) to the
coordinator's ROUTER; in-process, `InprocPrephaseHub` gives the same exchange over queues. Bytes
are counted here, apart from the training ledger, so that a run reports its set-up cost beside
its training traffic.
"""

from __future__ import annotations

import queue
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import zmq

from dfl_config.errors import DflMeshError
from dfl_node.settings.prephase import PrephaseSection
from dfl_node.transports.encryption import COORDINATOR, Curve
from dfl_node.transports.zeromq import routing_id
from dfl_node.wire.codec import Frame, Message, WireError, WireLimits, decode, encode
from dfl_node.wire.tags import Tag

REPORT_TAG = Tag("ctrl", 0, "prephase/report")
ANSWER_TAG = Tag("ctrl", 0, "prephase/answer")
ERROR_TAG = Tag("ctrl", 0, "prephase/error")
COORDINATOR_SRC = 0  # the `src` of the coordinator's messages; a node checks the tag instead
MAX_TENSORS = 64
ERROR_TEXT_BYTES = 1000

Arrays = dict[str, np.ndarray]


class PrephaseError(RuntimeError, DflMeshError):
    """The pre-phase failed: no answer in time, a malformed answer, or the coordinator's error."""


@dataclass(frozen=True)
class PrephaseResult:
    answer: Arrays
    sent_bytes: int
    received_bytes: int

    def ledger(self) -> dict[str, int]:
        """Counters for the node's done record: two messages, counted apart from training."""
        return {"messages": 2, "sent_bytes": self.sent_bytes,
                "received_bytes": self.received_bytes,
                "bytes": self.sent_bytes + self.received_bytes}


class PrephaseChannel(Protocol):
    def send(self, frames: Sequence[Frame]) -> None: ...

    def recv(self, timeout_s: float) -> list[Frame] | None: ...

    def close(self) -> None: ...


def limits_of(section: PrephaseSection) -> WireLimits:
    """The caps of the plan's `prephase` section (both ends use the same)."""
    return WireLimits(max_tensors=MAX_TENSORS, max_message_bytes=section.max_bytes)


def frame_bytes(frames: Sequence[Frame]) -> int:
    return sum(memoryview(f).nbytes for f in frames)


def error_frames(message: str) -> list[Frame]:
    """The coordinator's refusal: its one-line reason as a uint8 array."""
    text = np.frombuffer(message.encode()[:ERROR_TEXT_BYTES], dtype=np.uint8)
    return encode(COORDINATOR_SRC, ERROR_TAG, {"message": text})


def exchange_report(channel: PrephaseChannel, node_id: int, report: Mapping[str, np.ndarray],
                    limits: WireLimits, timeout_s: float) -> PrephaseResult:
    """Send this node's report, wait for its answer (or the coordinator's error)."""
    frames = encode(node_id, REPORT_TAG, dict(report))
    channel.send(frames)
    reply = channel.recv(timeout_s)
    if reply is None:
        raise PrephaseError(f"node {node_id}: no pre-phase answer within {timeout_s:g} s")
    message = _decoded(reply, limits)
    if message.tag == ERROR_TAG:
        text = bytes(message.tensors.get("message", np.zeros(0, np.uint8))).decode(
            errors="replace")
        raise PrephaseError(f"node {node_id}: coordinator refused the pre-phase: {text}")
    if message.tag != ANSWER_TAG:
        raise PrephaseError(f"node {node_id}: unexpected pre-phase message {message.tag}")
    answer = {k: np.array(v) for k, v in message.tensors.items()}
    return PrephaseResult(answer, frame_bytes(frames), frame_bytes(reply))


def _decoded(frames: Sequence[Frame], limits: WireLimits) -> Message:
    try:
        return decode(frames, limits)
    except WireError as err:
        raise PrephaseError(f"malformed pre-phase answer: {err}") from None


class ZmqPrephaseChannel:
    """A DEALER to the coordinator's ROUTER; the coordinator knows us by our routing id (and,
    with `curve`, by our key: it is a CURVE client of the coordinator's key)."""

    def __init__(self, node_id: int, address: str, max_bytes: int,
                 curve: Curve | None = None, context: zmq.Context | None = None) -> None:
        """`context`: the node's one ZeroMQ context (terminated by its owner), else its own."""
        self._own_ctx = context is None
        self._ctx = zmq.Context() if context is None else context
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.ROUTING_ID, routing_id(node_id))
        if curve is not None:
            curve.client(self._sock, curve.services[COORDINATOR])
        self._sock.setsockopt(zmq.MAXMSGSIZE, max_bytes)
        self._sock.setsockopt(zmq.LINGER, 5000)
        self._sock.connect(address)

    def send(self, frames: Sequence[Frame]) -> None:
        self._sock.send_multipart(frames, copy=False)

    def recv(self, timeout_s: float) -> list[Frame] | None:
        if not self._sock.poll(max(int(timeout_s * 1000), 0), zmq.POLLIN):
            return None
        return [f.buffer for f in self._sock.recv_multipart(copy=False)]

    def close(self) -> None:
        self._sock.close()
        if self._own_ctx:
            self._ctx.term()


class InprocPrephaseHub:
    """The in-process medium: one queue into the coordinator, one answer queue per node."""

    def __init__(self, node_ids: Sequence[int]) -> None:
        self.inbox: queue.SimpleQueue[tuple[int, list[Frame]]] = queue.SimpleQueue()
        self.answers: dict[int, queue.SimpleQueue[list[Frame]]] = {
            i: queue.SimpleQueue() for i in node_ids}

    def channel(self, node_id: int) -> InprocPrephaseChannel:
        return InprocPrephaseChannel(node_id, self)


class InprocPrephaseChannel:
    def __init__(self, node_id: int, hub: InprocPrephaseHub) -> None:
        self.node_id = node_id
        self._hub = hub

    def send(self, frames: Sequence[Frame]) -> None:
        self._hub.inbox.put((self.node_id, [bytes(f) for f in frames]))

    def recv(self, timeout_s: float) -> list[Frame] | None:
        try:
            return self._hub.answers[self.node_id].get(timeout=max(timeout_s, 0.0))
        except queue.Empty:
            return None

    def close(self) -> None:
        pass


@runtime_checkable
class HasPrephase(Protocol):
    def prephase_report(self) -> dict[str, np.ndarray]: ...

    def prephase_answer(self, answer: Mapping[str, np.ndarray]) -> None: ...


def run_prephase(plan_section: PrephaseSection | None, node_id: int, proto: object,
                 channel: PrephaseChannel | None) -> dict[str, int]:
    """The node's whole pre-phase (if its protocol has one); its traffic counters, else {}."""
    if not getattr(proto, "needs_prephase", False):
        return {}
    if not isinstance(proto, HasPrephase):
        raise PrephaseError(f"node {node_id}: the protocol needs a pre-phase but has no "
                            "prephase_report/prephase_answer")
    if plan_section is None:
        raise PrephaseError(f"node {node_id}: the protocol needs a pre-phase but the plan has "
                            "no prephase section")
    if channel is None:
        raise PrephaseError(f"node {node_id}: the protocol needs a pre-phase but the node has "
                            "no channel to the coordinator")
    result = exchange_report(channel, node_id, proto.prephase_report(),
                             limits_of(plan_section), plan_section.timeout_s)
    try:
        proto.prephase_answer(result.answer)
    except ValueError as exc:
        raise PrephaseError(f"node {node_id}: unusable pre-phase answer: {exc}") from None
    return result.ledger()
