"""The one-time pre-phase coordinator (a `PrePhase` capability, docs/extending/protocol.md):
every node's report in, an answer out.

It gathers exactly one report per node of the plan, hands them to the protocol's `coordinate`
(which computes, e.g., clusters), answers every node, and writes `prephase.json`
plus the protocol's files into the run directory. Reports are refused and counted, never trusted: a
message that is malformed (wire codec checks and size caps), comes from a connection that is not
a node of the plan, claims another node's id or repeats a report is dropped. If the protocol
refuses the reports, every node gets the one-line reason, so the run stops at once with a named
error instead of waiting for a timeout.

`serve` knows nothing of the launcher's run loop: it needs a plan, a channel and a directory,
so another process (a `dfl-node --coordinator` on another host) can run it as well.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import zmq

from dfl_node.plan import RunPlan
from dfl_node.runner.coordination import Coordination
from dfl_node.runner.prephase_client import (
    ANSWER_TAG,
    COORDINATOR_SRC,
    REPORT_TAG,
    InprocPrephaseHub,
    error_frames,
    frame_bytes,
    limits_of,
)
from dfl_node.transports.base import FORGED_PEER
from dfl_node.transports.encryption import COORDINATOR, Curve, load_curve
from dfl_node.transports.zeromq import authenticated_peer, peer_of, routing_id
from dfl_node.wire.codec import Frame, WireError, WireLimits, decode, encode
from launcher.run.directory import write_json
from protocols.registry import protocol_spec


class CoordinatorChannel(Protocol):
    def recv(self, timeout_s: float) -> tuple[int, list[Frame]] | None: ...

    def send(self, node_id: int, frames: Sequence[Frame]) -> None: ...

    def close(self) -> None: ...


class ZmqCoordinatorChannel:
    """A ROUTER bound on the plan's pre-phase address; the peer id is the DEALER's routing id.
    With `curve` (--secure) it admits only the nodes' keys, and the peer id is the key's node
    (FORGED_PEER when the routing id names another)."""

    def __init__(self, address: str, max_bytes: int, curve: Curve | None = None) -> None:
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.ROUTER)
        self._zap = curve.serve(self._sock, curve.nodes) if curve is not None else None
        self._sock.setsockopt(zmq.MAXMSGSIZE, max_bytes)
        self._sock.setsockopt(zmq.LINGER, 5000)
        self._sock.bind(address)

    def recv(self, timeout_s: float) -> tuple[int, list[Frame]] | None:
        if not self._sock.poll(max(int(timeout_s * 1000), 0), zmq.POLLIN):
            return None
        identity, *frames = self._sock.recv_multipart(copy=False)
        peer = peer_of(identity.bytes) if self._zap is None else authenticated_peer(identity)
        return peer, [f.buffer for f in frames]

    def send(self, node_id: int, frames: Sequence[Frame]) -> None:
        self._sock.send_multipart([routing_id(node_id), *frames], copy=False)

    def close(self) -> None:
        self._sock.close()
        if self._zap is not None:
            self._zap.close()
        self._ctx.term()


class InprocCoordinatorChannel:
    def __init__(self, hub: InprocPrephaseHub) -> None:
        self._hub = hub

    def recv(self, timeout_s: float) -> tuple[int, list[Frame]] | None:
        try:
            return self._hub.inbox.get(timeout=max(timeout_s, 0.0))
        except queue.Empty:
            return None

    def send(self, node_id: int, frames: Sequence[Frame]) -> None:
        self._hub.answers[node_id].put([bytes(f) for f in frames])

    def close(self) -> None:
        pass


@dataclass
class Gathered:
    reports: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    received_bytes: int = 0
    rejected: Counter[str] = field(default_factory=Counter)


def gather(plan: RunPlan, channel: CoordinatorChannel, timeout_s: float) -> Gathered:
    """One valid report per node of the plan, or TimeoutError naming the silent nodes."""
    limits = limits_of(plan.required_prephase())
    out = Gathered()
    deadline = time.monotonic() + timeout_s
    while len(out.reports) < len(plan.ids):
        arrival = channel.recv(min(0.5, max(deadline - time.monotonic(), 0.0)))
        if arrival is None:
            if time.monotonic() >= deadline:
                missing = sorted(set(plan.ids) - set(out.reports))
                raise TimeoutError(f"no pre-phase report from nodes {missing}")
            continue
        peer, frames = arrival
        reason = admit(plan, out, peer, frames, limits)
        if reason:
            out.rejected[reason] += 1
    return out


def admit(plan: RunPlan, out: Gathered, peer: int, frames: list[Frame],
          limits: WireLimits) -> str:
    """Store a valid report; return the reason it was refused otherwise ("" if accepted)."""
    if peer == FORGED_PEER:
        return "curve_sender_mismatch"
    if peer not in plan.ids:
        return "not_a_node"
    try:
        message = decode(frames, limits)
    except WireError as err:
        return err.reason
    if message.src != peer:
        return "src_mismatch"
    if message.tag != REPORT_TAG:
        return "bad_tag"
    if peer in out.reports:
        return "duplicate"
    out.reports[peer] = {k: np.array(v) for k, v in message.tensors.items()}
    out.received_bytes += frame_bytes(frames)
    return ""


def serve(plan: RunPlan, channel: CoordinatorChannel, run_dir: Path,
          timeout_s: float | None = None, rejected: Counter[str] | None = None) -> Coordination:
    """The whole pre-phase on the coordinator's side; files land in `run_dir`. `rejected`
    gets the refused messages by reason (the launcher adds them to the run's summary)."""
    timeout = plan.required_prephase().timeout_s if timeout_s is None else timeout_s
    gathered = gather(plan, channel, timeout)
    if rejected is not None:
        rejected.update(gathered.rejected)
    try:
        prephase = protocol_spec(plan.protocol).prephase
        if prephase is None:
            raise TypeError(f"{plan.protocol} has no pre-phase")
        result = prephase.coordinate(plan, gathered.reports)
    except Exception as exc:  # the nodes must hear of any failure, or they wait for a timeout
        for node in sorted(gathered.reports):
            channel.send(node, error_frames(str(exc)))
        raise
    sent = 0
    for node in sorted(result.answers):
        frames = encode(COORDINATOR_SRC, ANSWER_TAG, result.answers[node])
        channel.send(node, frames)
        sent += frame_bytes(frames)
    record = {"protocol": plan.protocol, "plan_hashes": plan.section_hashes(),
              "traffic": {"messages": 2 * len(plan.ids), "report_bytes": gathered.received_bytes,
                          "answer_bytes": sent, "bytes": gathered.received_bytes + sent},
              "rejected": dict(sorted(gathered.rejected.items())), **result.record}
    write_json(run_dir / "prephase.json", record)
    for name, content in result.files.items():
        write_json(run_dir / name, content)
    return result


class CoordinatorThread:
    """`serve` beside the launcher's run loop; `error` holds its failure, if any, and
    `rejected` the messages it refused by reason."""

    def __init__(self, plan: RunPlan, run_dir: Path,
                 make_channel: Callable[[], CoordinatorChannel]) -> None:
        self.error: str | None = None
        self.rejected: Counter[str] = Counter()
        self._plan, self._run_dir, self._make_channel = plan, run_dir, make_channel
        self._thread = threading.Thread(target=self._body, name="prephase", daemon=True)
        self._thread.start()

    def _body(self) -> None:
        channel = self._make_channel()
        try:
            serve(self._plan, channel, self._run_dir, rejected=self.rejected)
        except Exception as exc:  # reported by the launcher; the nodes already got the reason
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            channel.close()

    def join(self, timeout_s: float = 5.0) -> None:
        self._thread.join(timeout_s)


def coordinate_alone(plan: RunPlan, run_dir: Path, curve: Curve | None) -> Coordination:
    """The pre-phase on a host of its own (`dfl-node --coordinator`), started before or after
    the nodes: it waits for the last node's report as long as a node may wait for the mesh
    to form and then for its answer."""
    section = plan.required_prephase()
    channel = ZmqCoordinatorChannel(section.bind, section.max_bytes, curve)
    try:
        return serve(plan, channel, run_dir, plan.wire.rendezvous_seconds + section.timeout_s)
    finally:
        channel.close()


def start_coordinator(plan: RunPlan, run_dir: Path,
                      hub: InprocPrephaseHub | None) -> CoordinatorThread | None:
    """The coordinator of this plan's transport, or None if the protocol needs no pre-phase."""
    section = plan.prephase
    if section is None:
        return None
    if hub is not None:
        return CoordinatorThread(plan, run_dir, lambda: InprocCoordinatorChannel(hub))
    curve = load_curve(plan, COORDINATOR)
    return CoordinatorThread(
        plan, run_dir, lambda: ZmqCoordinatorChannel(section.bind, section.max_bytes, curve))


