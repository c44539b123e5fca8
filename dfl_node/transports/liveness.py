"""Liveness along graph edges: is each neighbour's process still answering?

How: ZMTP heartbeats on the transport's own DEALER connections (one per graph edge and
direction), and a small thread that reads those DEALERs' monitor events. Why this way:
- The PONG that answers a PING is produced by libzmq's I/O thread, a C++ thread that never
  needs the GIL. A node deep in a long computation (Python loops, torch kernels) keeps
  answering, so being busy never looks like being dead; a killed, stopped or frozen process,
  or a host that vanished, stops answering.
- Only graph edges carry heartbeats (a node pings the neighbours it is connected to anyway):
  no all-to-all traffic, no extra port to open, and the connection's security settings apply to
  heartbeats exactly as to data.
- Application messages never carry liveness, so a round that legitimately takes longer than the
  deadline (a slow neighbour, a long local epoch) is waited for, not declared a failure.

The deadline D (`wire.deadline_s`): a PING every D/10; a connection that hears nothing for
0.4 D is dropped by libzmq (and by the neighbour, through the PING's TTL); a neighbour whose
connection has been down (not re-established by a completed handshake) for D/2 more is dead.
So a process killed outright is declared dead D/2 after its socket closes, and a frozen one
within about D of its last answer.

A crowded host stretches D. The I/O thread answers without the GIL, but not without a core:
with hundreds of node processes per core (a 500-node ring on 2 cores) a thread can wait
seconds for one, the 0.4 D silence drops a live connection, and the message that was crossing
it is lost (the neighbour then waits out `recv_timeout_s`). So D is `wire.deadline_s` times
the host's node processes per core over CROWD_FREE, when that is above 1: a 500-node ring on
2 cores gets 50 s from the default 10, a 20-node one keeps 10.

Heartbeats are control traffic and never reach the ledger's training cells: libzmq does not
report individual PINGs, so `traffic()` counts them from the time each connection was up
(one PING of 9 bytes and one PONG of 7 bytes per interval and direction).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import zmq
from pydantic import ValidationError

from dfl_config.errors import DflMeshError
from dfl_config.problems import one_line
from dfl_node.settings.wire import WireSettings

UP_EVENT = zmq.EVENT_HANDSHAKE_SUCCEEDED
DOWN_EVENT = zmq.EVENT_DISCONNECTED
PING_BYTES = 9  # ZMTP 3.1 command frame: flags, size, "\x04PING", 2-byte TTL
PONG_BYTES = 7  # flags, size, "\x04PONG"
CROWD_FREE = 50  # node processes per core up to which `wire.deadline_s` is taken as it is
STALL_ENV = "DFL_TEST_STALL"  # fault injection for tests: "node:round:seconds"


class MeshFailure(RuntimeError, DflMeshError):
    """The run cannot go on because nodes `peers` are gone; the message is one line."""

    silent_intervals: int | None = None  # set by a heartbeat verdict (PeerDead)

    def __init__(self, message: str, peers: tuple[int, ...]) -> None:
        self.peers = tuple(sorted(peers))
        super().__init__(message)


class PeerDead(MeshFailure):
    """Neighbours this node waited for stopped answering heartbeats past the deadline.

    `silent_intervals`: for how many heartbeat intervals the longest-silent of them had had no
    connection when this node concluded (None where no heartbeats ran). The promise "found
    within a deadline of its last answer" is stated in these units, so that a test can check it
    by counting intervals, whatever the load stretched them to in seconds."""

    def __init__(self, node_id: int, peers: tuple[int, ...], deadline_s: float,
                 silent_intervals: int | None = None) -> None:
        super().__init__(f"node {node_id}: neighbour(s) {sorted(peers)} stopped answering "
                         f"(no heartbeat within the {deadline_s:g} s deadline)", peers)
        self.silent_intervals = silent_intervals


def failure_fields(exc: BaseException) -> dict[str, Any]:
    """What a node's error record adds so that the collector can name the dead, not the node
    that noticed (and, for a heartbeat verdict, how long they had been silent)."""
    if not isinstance(exc, MeshFailure):
        return {}
    silent = exc.silent_intervals
    return {"dead": list(exc.peers), **({} if silent is None else {"silent_intervals": silent})}


def arm(comm: PeerWaiter, watch: PeerLiveness | None) -> None:
    """Let `comm`'s waits consult `watch` from now on (after start-up; see LivenessWatch.arm)."""
    if watch is not None:
        watch.arm()
        comm.liveness = watch


@dataclass(frozen=True)
class Heartbeat:
    """The socket timings derived from one deadline (see the module docstring)."""

    deadline_s: float

    @property
    def interval_ms(self) -> int:
        return max(1, round(self.deadline_s * 100))

    @property
    def timeout_ms(self) -> int:
        return max(2, round(self.deadline_s * 400))

    @property
    def grace_s(self) -> float:
        return self.deadline_s / 2

    @classmethod
    def of(cls, wire: Mapping[str, Any] | WireSettings, crowd: float = 1.0) -> Heartbeat:
        """The plan's heartbeat (`wire.deadline_s`; a plan without it gets WireSettings's
        default) on a host running `crowd` node processes per core (the module docstring)."""
        try:
            deadline = WireSettings.model_validate(wire).deadline_s
        except ValidationError as exc:
            raise ValueError(one_line(exc, WireSettings, ("wire",))) from None
        return cls(deadline * max(1.0, crowd / CROWD_FREE))

    def apply(self, socket: zmq.Socket) -> None:
        """Set before connect: libzmq reads these when it builds a connection."""
        socket.setsockopt(zmq.HEARTBEAT_IVL, self.interval_ms)
        socket.setsockopt(zmq.HEARTBEAT_TIMEOUT, self.timeout_ms)
        socket.setsockopt(zmq.HEARTBEAT_TTL, self.timeout_ms)
        socket.setsockopt(zmq.HANDSHAKE_IVL, self.timeout_ms)


class PeerLiveness(Protocol):
    """What `Comm` asks while it waits for a neighbour."""

    deadline_s: float

    def dead(self, peer: int) -> bool: ...

    def silent_intervals(self, peer: int) -> int: ...

    def arm(self) -> None: ...


class PeerWaiter(Protocol):
    liveness: PeerLiveness | None


@dataclass
class _Link:
    up: bool
    since: float  # monotonic time of the last change (or of arming)
    up_seconds: float = 0.0


class LivenessWatch:
    """Reads the DEALERs' monitor sockets in its own thread; `dead` may be asked from any
    thread. The monitor sockets become this watch's: it closes them when stopped.

    The thread sleeps until an event comes (a connection up or down: a few per run) or `stop`
    writes to its wake-up pipe, never on a timer: a node on a crowded core would otherwise pay
    a wake-up and a turn at the GIL, taken from the round's thread, ten times a second."""

    def __init__(self, node_id: int, heartbeat: Heartbeat, monitors: dict[int, zmq.Socket]):
        self.node_id = node_id
        self.heartbeat = heartbeat
        self.deadline_s = heartbeat.deadline_s
        now = time.monotonic()
        self._links = {peer: _Link(False, now) for peer in monitors}
        self._ignored: set[int] = set()
        self._lock = threading.Lock()
        self._wake_read, self._wake_write = os.pipe()  # stop() writes one byte
        self._stopped_at: float | None = None
        self._thread = threading.Thread(target=self._run, args=(dict(monitors),),
                                        name=f"liveness-{node_id}", daemon=True)
        self._thread.start()

    def arm(self) -> None:
        """Start counting silence now for neighbours not yet connected: called once the mesh
        has met, so start-up waits (governed by the rendezvous deadline) never count."""
        now = time.monotonic()
        with self._lock:
            for link in self._links.values():
                if not link.up:
                    link.since = now

    def connected(self, peer: int) -> bool:
        with self._lock:
            return self._links[peer].up

    def dead(self, peer: int) -> bool:
        with self._lock:
            link = self._links.get(peer)
            if link is None or peer in self._ignored or link.up:
                return False
            return time.monotonic() - link.since >= self.heartbeat.grace_s

    def silent_intervals(self, peer: int) -> int:
        """Whole heartbeat intervals for which `peer` has had no connection (0 while it has
        one): a dead verdict comes after grace_s, half a deadline, five intervals."""
        with self._lock:
            link = self._links[peer]
            if link.up:
                return 0
            return int((time.monotonic() - link.since) * 1000 / self.heartbeat.interval_ms)

    def ignore(self, peer: int) -> None:
        """Stop watching a neighbour the mesh has dropped."""
        with self._lock:
            self._ignored.add(peer)

    def stop(self) -> None:
        if self._wake_write < 0:  # stopped already
            return
        os.write(self._wake_write, b"x")
        self._thread.join()
        os.close(self._wake_read)
        os.close(self._wake_write)
        self._wake_read = self._wake_write = -1

    def traffic(self) -> dict[int, dict[str, int]]:
        """Heartbeats this node sent per neighbour (its PINGs and its PONGs to theirs),
        counted from the time each connection was up."""
        end = self._stopped_at or time.monotonic()
        interval = self.heartbeat.interval_ms / 1000
        out = {}
        with self._lock:
            for peer, link in sorted(self._links.items()):
                seconds = link.up_seconds + (end - link.since if link.up else 0.0)
                beats = int(seconds / interval)
                out[peer] = {"messages": 2 * beats, "bytes": beats * (PING_BYTES + PONG_BYTES)}
        return out

    def _run(self, monitors: dict[int, zmq.Socket]) -> None:
        # here, not at the top: it imports asyncio (about 0.08 CPU-s), which a launcher that
        # only checks a request and refuses it never needs
        from zmq.utils.monitor import recv_monitor_message

        poller = zmq.Poller()
        poller.register(self._wake_read, zmq.POLLIN)
        peer_of = {}
        for peer, socket in monitors.items():
            poller.register(socket, zmq.POLLIN)
            peer_of[socket] = peer
        try:
            while True:
                ready = poller.poll()
                if any(socket == self._wake_read for socket, _ in ready):
                    break
                for socket, _ in ready:
                    self._note(peer_of[socket], recv_monitor_message(socket)["event"])
        finally:
            for socket in monitors.values():
                socket.close(linger=0)
            with self._lock:
                self._stopped_at = time.monotonic()

    def _note(self, peer: int, event: Any) -> None:
        now = time.monotonic()
        with self._lock:
            link = self._links[peer]
            if event == UP_EVENT and not link.up:
                link.up, link.since = True, now
            elif event == DOWN_EVENT and link.up:
                link.up_seconds += now - link.since
                link.up, link.since = False, now


def stall_for_test(node_id: int, round_: int) -> str:
    """Fault injection for the liveness tests: with DFL_TEST_STALL="node:round:seconds" that
    node computes (a busy loop holding the GIL) for that long at the start of that round, so a
    test can show that a busy node keeps answering heartbeats. Returns the line for the node's
    log once the stall ran out (the test's proof that it happened), else ""."""
    spec = os.environ.get(STALL_ENV, "")
    if not spec:
        return ""
    node, round_at, seconds = spec.split(":")
    if int(node) == node_id and int(round_at) == round_:
        end = time.monotonic() + float(seconds)
        while time.monotonic() < end:
            pass
        return f"stalled round {round_} for {seconds} s ({STALL_ENV})"
    return ""
