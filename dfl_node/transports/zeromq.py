"""The ZeroMQ transport: one bound ROUTER per node, one connected DEALER per neighbour.

Why ROUTER/DEALER:
- The sender's identity comes from the connection, not from the message: each DEALER sets its
  ROUTING_ID to its node id, and the ROUTER prefixes every received message with the routing id
  of the connection it came in on. `Comm` then checks that the header's `src` agrees, so a peer
  cannot pose as another one by writing a different id into its header.
- No lockstep: REQ/REP would force send-receive alternation, and a gossip step sends to every
  neighbour before it receives from any. DEALER and ROUTER are fully asynchronous.
- Per-peer queues: each DEALER has its own send queue (SNDHWM) to exactly one neighbour, so a slow
  neighbour fills only its own queue; the ROUTER fair-queues arrivals from all connections and
  keeps each connection's order, which the closing barrier relies on.
- One ROUTER per node means one port per node, which the launcher and compose files allocate.

Routing ids are the node id as 4 bytes, big-endian unsigned: fixed length, no parsing of text,
and distinct from the 5-byte ids ZeroMQ invents for connections that set none, so such a
connection is reported as UNKNOWN_PEER. DEALERs connect with IMMEDIATE off, so messages queue
while a neighbour is still starting (up to the high-water mark); a send that cannot queue within
`send_timeout_s` raises TransportError instead of blocking forever.

Large frames go out zero-copy (copy=False): ZeroMQ's I/O thread reads the caller's buffers
after `send` returns, straight into the kernel's socket. Each such frame is tracked, and `flush`
waits until ZeroMQ has let go of every one of them; `Comm` calls it before an exchange returns,
so the caller's tensors are never copied on send and never changed while ZeroMQ reads them.
Frames below ZERO_COPY_BYTES are copied by pyzmq instead: a tracked frame is released through
pyzmq's garbage-collector thread, whose wake-up, lock and event per frame cost more CPU than
copying a quarter of a megabyte, and a node that sends a small model every round (the MLP's
200 kB) would pay that on every message. `discard` closes and reopens a connection whose
queue will never drain (a neighbour that died), which is how ZeroMQ lets go of buffers queued
for it. Received frames are zero-copy, writable memoryviews of ZeroMQ's message buffers, which
ZeroMQ hands to the receiver alone, so a large one becomes the protocol's tensor in place
(dfl_node/comm/received.py). `close()` belongs after `Comm`'s closing barrier; sockets linger
so that everything queued still goes out.

MAXMSGSIZE is a per-frame limit enforced by ZeroMQ: a peer that sends a larger frame is
disconnected (and reconnects), and that message is lost before `Comm` can count it, so pass
`WireLimits.max_frame_bytes`. ZeroMQ applies it to the frame as it crosses the wire, which under
CURVE is the encrypted frame, `CURVE_OVERHEAD` bytes longer; the limit is raised by that much, so
that a frame of exactly `max_message_bytes` is delivered with and without --secure. The
ROUTER's RCVHWM is per connection: `peer_messages` bounds the messages one peer may have
waiting in this node (dfl_node/runner/receive_caps.py).

With `curve` (--secure, dfl_node/transports/encryption.py) the ROUTER is a CURVE server that
admits only the neighbours' keys (`peers`, and `admit` for neighbours whose address comes later),
all of them before it binds: a neighbour that connected between the bind and its admission would be
refused by the ZAP handler, and libzmq gives up on a connection refused at authentication, so that
neighbour's messages to this node would never leave its queue. Each DEALER is a CURVE client
of its neighbour, and the peer id of a message is the node whose key its connection
authenticated with; a connection whose routing id names another node is reported as
FORGED_PEER.

With `discover`, the neighbours' addresses are not known before this node listens (a bind on a
port the OS picks): it is called with the bound address once the ROUTER is bound and returns
theirs, and the DEALERs are set up from its answer as from `peers`.

With `heartbeat` the DEALERs carry ZMTP heartbeats and a `LivenessWatch`
(dfl_node/transports/liveness.py) reads their monitor events: `liveness.dead(peer)` says whether a
neighbour stopped answering. `drop_peer` closes the connection to a neighbour the mesh has declared
dead, at once, so that what was queued for it does not hold up `close()`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import zmq

from dfl_node.transports.base import FORGED_PEER, UNKNOWN_PEER, TransportError
from dfl_node.transports.encryption import Curve, ZapHandler, key_owner
from dfl_node.transports.liveness import DOWN_EVENT, UP_EVENT, Heartbeat, LivenessWatch
from dfl_node.transports.routing_ids import ROUTING_ID
from dfl_node.wire.codec import Frame

ZERO_COPY_BYTES = 256 << 10  # frames at least this large are sent zero-copy and tracked
# A CURVE MESSAGE command wraps each frame: "\x07MESSAGE", an 8-byte nonce, a flags byte and a
# 16-byte authenticator (RFC 26).
CURVE_OVERHEAD = 8 + 8 + 1 + 16


def routing_id(node_id: int) -> bytes:
    """The ZeroMQ routing id of a node's DEALERs: its id as 4 bytes, big-endian."""
    return ROUTING_ID.pack(node_id)


def peer_of(identity: bytes) -> int:
    """The node id a routing id stands for, or UNKNOWN_PEER when it is not one of ours."""
    return ROUTING_ID.unpack(identity)[0] if len(identity) == ROUTING_ID.size else UNKNOWN_PEER


def authenticated_peer(identity: zmq.Frame) -> int:
    """The node a ROUTER's message came from under CURVE: the owner of the connection's key,
    or FORGED_PEER when the routing id the connection declared names someone else."""
    owner = key_owner(identity)
    return owner if peer_of(identity.bytes) == owner else FORGED_PEER


class ZmqTransport:
    def __init__(
        self,
        node_id: int,
        bind_addr: str,
        peers: Mapping[int, str],
        *,
        max_message_bytes: int,
        hwm: int = 1000,
        peer_messages: int | None = None,
        linger_ms: int = 5000,
        send_timeout_s: float = 60.0,
        context: zmq.Context | None = None,
        curve: Curve | None = None,
        heartbeat: Heartbeat | None = None,
        admit: Iterable[int] = (),
        discover: Callable[[str], Mapping[int, str]] | None = None,
    ) -> None:
        self.node_id = node_id
        self._hwm = hwm
        self._linger_ms = linger_ms
        self._send_timeout_ms = math.ceil(send_timeout_s * 1000)
        self._own_context = context is None
        self._context = zmq.Context() if context is None else context
        self._dealers: dict[int, zmq.Socket] = {}
        self._addresses: dict[int, str] = {}
        self._pending: dict[int, list[zmq.MessageTracker]] = {}
        self._closed = False
        self._curve = curve
        self._zap: ZapHandler | None = None
        self._heartbeat = heartbeat
        self._monitors: dict[int, zmq.Socket] = {}
        self.liveness: LivenessWatch | None = None
        self._router = self._socket(zmq.ROUTER)
        self._poller = zmq.Poller()
        self._poller.register(self._router, zmq.POLLIN)
        try:
            if curve is not None:  # every neighbour is admitted before the socket listens
                self._zap = curve.serve(self._router, {
                    peer: curve.nodes[peer] for peer in {*peers, *admit}})
            overhead = CURVE_OVERHEAD if curve is not None else 0
            self._router.setsockopt(zmq.MAXMSGSIZE, max_message_bytes + overhead)
            if peer_messages is not None:  # per connection: what one peer may have waiting
                self._router.setsockopt(zmq.RCVHWM, peer_messages)
            self._router.bind(bind_addr)
            if discover is not None:  # before the DEALERs: heartbeats are set up with them
                peers = {**peers, **discover(self.bound_address)}
            for peer, address in sorted(peers.items()):
                self.add_peer(peer, address)
            if heartbeat is not None:
                self.liveness = LivenessWatch(node_id, heartbeat, self._monitors)
        except (zmq.ZMQError, TransportError) as err:
            self.close()
            raise TransportError(f"node {node_id}: cannot set up on {bind_addr}: {err}") from err
        except BaseException:  # `discover`'s own failure (no table in time): no socket stays
            self.close()
            raise

    @property
    def bound_address(self) -> str:
        """The address actually bound (resolves port 0 to the port the OS chose)."""
        return self._router.getsockopt_string(zmq.LAST_ENDPOINT)

    def add_peer(self, peer: int, address: str) -> None:
        """Connect a DEALER to a neighbour's ROUTER (for peers whose address came later)."""
        if peer in self._dealers:
            raise TransportError(f"node {self.node_id}: peer {peer} is already connected")
        dealer = self._socket(zmq.DEALER)
        self._dealers[peer] = dealer
        self._addresses[peer] = address
        dealer.setsockopt(zmq.ROUTING_ID, routing_id(self.node_id))
        if self._curve is not None and self._zap is not None:
            self._curve.client(dealer, self._curve.nodes[peer])
            self._zap.admit(peer, self._curve.nodes[peer])
        if self._heartbeat is not None and self.liveness is None:
            self._heartbeat.apply(dealer)
            self._monitors[peer] = dealer.get_monitor_socket(UP_EVENT | DOWN_EVENT)
        try:
            dealer.connect(address)
        except zmq.ZMQError as err:
            raise TransportError(f"node {self.node_id}: cannot connect to {address}") from err

    def send(self, dst: int, frames: Sequence[Frame]) -> None:
        self._check_open()
        dealer = self._dealers.get(dst)
        if dealer is None:
            raise TransportError(f"node {self.node_id}: {dst} is not a peer")
        last = len(frames) - 1
        try:
            trackers = [dealer.send(frame, zmq.SNDMORE if i < last else 0, copy=False, track=True)
                        for i, frame in enumerate(frames)]
        except zmq.Again as err:
            raise TransportError(f"node {self.node_id}: send to {dst} timed out") from err
        held = [tracker for tracker in trackers if not tracker.done]
        if held:
            self._pending.setdefault(dst, []).extend(held)

    def flush(self, timeout_s: float) -> tuple[int, ...]:
        """Wait up to `timeout_s` until ZeroMQ holds none of the buffers given to `send`; the
        peers whose messages still hold some (ascending; empty once all are released)."""
        deadline = time.monotonic() + timeout_s
        for peer, trackers in list(self._pending.items()):
            try:
                for tracker in trackers:
                    tracker.wait(max(deadline - time.monotonic(), 0.0))
            except zmq.NotDone:
                pass
            held = [tracker for tracker in trackers if not tracker.done]
            if held:
                self._pending[peer] = held
            else:
                del self._pending[peer]
        return tuple(sorted(self._pending))

    def discard(self, peer: int) -> None:
        """Drop what is queued for `peer` and connect afresh (without heartbeats): for a
        neighbour that stopped answering, whose queue would otherwise hold the sender's
        buffers until it came back. The caller may change those buffers at once: whatever
        ZeroMQ still reads from them while it tears the connection down reaches nobody, and
        pyzmq keeps them allocated until ZeroMQ lets go."""
        if self._forget(peer):
            self.add_peer(peer, self._addresses[peer])

    def recv(self, timeout_s: float) -> tuple[int, list[Frame]] | None:
        """A message already queued is taken without polling; only an empty queue waits, on
        a poller kept for the socket (pyzmq's `Socket.poll` builds one per call). The parts
        are read by their `more` flag (`recv_multipart` asks the socket for RCVMORE after
        each part): a message's parts arrive together, so none of these reads blocks."""
        self._check_open()
        identity = self._queued()
        if identity is None and self._poller.poll(max(math.ceil(timeout_s * 1000), 0)):
            identity = self._queued()
        if identity is None:
            return None
        frames: list[Frame] = []
        part = identity
        while part.more:
            part = self._router.recv(zmq.NOBLOCK, copy=False)
            frames.append(part.buffer)
        peer = peer_of(identity.bytes) if self._curve is None else authenticated_peer(identity)
        return peer, frames

    def _queued(self) -> zmq.Frame | None:
        """The first part of the next message, if one is queued."""
        try:
            return self._router.recv(zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return None

    def drop_peer(self, peer: int) -> None:
        """Stop talking to a neighbour the mesh has dropped, discarding what is queued for it."""
        if self.liveness is not None:
            self.liveness.ignore(peer)
        self._forget(peer)

    def _forget(self, peer: int) -> bool:
        """Close `peer`'s DEALER at once, with what is queued for it; False: there was none."""
        dealer = self._dealers.pop(peer, None)
        self._pending.pop(peer, None)
        if dealer is None:
            return False
        dealer.disable_monitor()  # no event for a reader the watch may close (close())
        dealer.close(linger=0)
        return True

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # No more monitor events first: libzmq's I/O thread sends each one blocking, so an
        # event for a DEALER still lingering (a neighbour that leaves) once the watch below has
        # closed its reading end would stop the I/O thread for good, and with it every other
        # socket of the node's context (its results to the collector, launcher/node_cli.py).
        for dealer in self._dealers.values():
            dealer.disable_monitor()
        if self.liveness is not None:
            self.liveness.stop()
        for monitor in self._monitors.values():  # the watch closed them, unless it never ran
            monitor.close(linger=0)
        for socket in (*self._dealers.values(), self._router):
            socket.close(linger=self._linger_ms)
        if self._zap is not None:
            self._zap.close()
        if self._own_context:
            self._context.term()  # returns once queued messages are out or linger expired

    def _socket(self, kind: int) -> zmq.Socket:
        socket = self._context.socket(kind, copy_threshold=ZERO_COPY_BYTES)
        socket.setsockopt(zmq.SNDHWM, self._hwm)
        socket.setsockopt(zmq.RCVHWM, self._hwm)
        socket.setsockopt(zmq.LINGER, self._linger_ms)
        socket.setsockopt(zmq.SNDTIMEO, self._send_timeout_ms)
        return socket

    def _check_open(self) -> None:
        if self._closed:
            raise TransportError(f"node {self.node_id}: transport is closed")
