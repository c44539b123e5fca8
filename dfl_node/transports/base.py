"""What `Comm` needs from a transport: addressed, ordered, whole-message delivery.

A transport moves lists of frames between nodes and reports, for every received message, the
peer id taken from the *connection* it came in on, never from the message itself; `Comm` checks
that the header agrees. Per sender, messages arrive in the order they were sent (both transports
guarantee it), which is what makes the closing barrier lossless. A transport is used by one
thread only, the one that runs its node's `Comm`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from dfl_config.errors import DflMeshError
from dfl_node.transports.liveness import LivenessWatch
from dfl_node.wire.codec import Frame

# Peer id reported for a connection whose identity is not a well-formed node id.
UNKNOWN_PEER = -1
# Peer id reported, under --secure, for a connection that claims a node id (its routing id) other
# than the owner of the CURVE key it authenticated with: a neighbour posing as another.
FORGED_PEER = -2


class TransportError(RuntimeError, DflMeshError):
    """The transport cannot do what was asked (unknown peer, closed, send timed out, bind)."""


class Transport(Protocol):
    node_id: int

    @property
    def liveness(self) -> LivenessWatch | None:
        """Heartbeats to the neighbours, where the transport has them (read by the runtime)."""
        ...

    def send(self, dst: int, frames: Sequence[Frame]) -> None:
        """Queue one message to neighbour `dst`.

        The transport may read the buffers after `send` returns, until `flush` says it no
        longer does; `Comm` leaves them unchanged until then (it flushes before it returns).
        """
        ...

    def flush(self, timeout_s: float) -> tuple[int, ...]:
        """Wait up to `timeout_s` until no buffer given to `send` is read any more; the peers
        whose messages still hold some (empty once every buffer is released)."""
        ...

    def discard(self, peer: int) -> None:
        """Drop what is queued for `peer` (so that its buffers are released) but keep sending
        to it: for a neighbour that stopped answering before the mesh dropped it."""
        ...

    def recv(self, timeout_s: float) -> tuple[int, list[Frame]] | None:
        """The next message as (peer id from the connection, frames), or None after timeout_s.

        A writable frame must be memory no other party reads or writes: `Comm` may keep it as
        a received tensor (dfl_node/comm/received.py). A frame that aliases anyone else's memory is
        handed out read-only.
        """
        ...

    def drop_peer(self, peer: int) -> None:
        """Stop sending to neighbour `peer` (declared dead); what is queued for it is dropped."""
        ...

    def close(self) -> None:
        """Release sockets after delivering what is queued (bounded by the linger time)."""
        ...
