"""The in-process transport: every node a thread of one process, one queue per node.

It runs the same node code as the ZeroMQ transport, with the same guarantees (per-sender order,
peer id from the sending transport, not from the header), so a whole mesh can be run and
debugged in one process. Frames are copied to `bytes` on send, so a receiver never aliases a
sender's tensors. Delivery order across senders depends on thread scheduling; results do not,
because `Comm` keys every message by (source, tag).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Sequence

from dfl_node.transports.base import TransportError
from dfl_node.wire.codec import Frame

_Envelope = tuple[int, list[Frame]]
STOPPED = -1  # the sender id of the envelope that wakes a waiting node when the run stops


class InprocHub:
    """The shared medium of one in-process run: a mailbox per node id."""

    def __init__(self, node_ids: Iterable[int] = ()) -> None:
        self._lock = threading.Lock()
        self._mailboxes: dict[int, queue.SimpleQueue[_Envelope]] = {
            node_id: queue.SimpleQueue() for node_id in node_ids
        }
        self.stopped = False

    def stop(self) -> None:
        """End the run's node threads at their next send or receive, waking the waiting ones:
        threads cannot be killed as processes can, and a thread still inside torch when the
        interpreter exits aborts it (std::terminate) instead of letting it exit as asked."""
        self.stopped = True
        with self._lock:
            boxes = list(self._mailboxes.values())
        for box in boxes:
            box.put((STOPPED, []))

    def mailbox(self, node_id: int) -> queue.SimpleQueue[_Envelope]:
        """The node's queue, created on first use so senders may start before receivers."""
        with self._lock:
            return self._mailboxes.setdefault(node_id, queue.SimpleQueue())

    def deliver(self, src: int, dst: int, frames: Sequence[Frame]) -> None:
        """Put a copy of the frames in `dst`'s mailbox, stamped with the sender's id."""
        self.mailbox(dst).put((src, [bytes(frame) for frame in frames]))


class InprocTransport:
    liveness = None  # threads of one process cannot die alone: nothing to watch

    def __init__(self, node_id: int, hub: InprocHub, peers: Iterable[int]) -> None:
        self.node_id = node_id
        self._hub = hub
        self._peers = frozenset(peers)
        self._mailbox = hub.mailbox(node_id)
        self._closed = False

    def send(self, dst: int, frames: Sequence[Frame]) -> None:
        self._check_open()
        if dst not in self._peers:
            raise TransportError(f"node {self.node_id}: {dst} is not a peer")
        self._hub.deliver(self.node_id, dst, frames)

    def recv(self, timeout_s: float) -> tuple[int, list[Frame]] | None:
        self._check_open()
        try:
            got = self._mailbox.get(timeout=max(timeout_s, 0.0))
        except queue.Empty:
            return None
        if got[0] == STOPPED:
            self._mailbox.put(got)  # for the next receive too, should the node catch this one
            self._check_open()
        return got

    def flush(self, timeout_s: float) -> tuple[int, ...]:
        """Nothing to wait for: `send` copied the frames before it returned."""
        return ()

    def discard(self, peer: int) -> None:
        """Nothing is held for `peer`: delivered frames are copies in its mailbox."""

    def drop_peer(self, peer: int) -> None:
        self._peers = self._peers - {peer}

    def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise TransportError(f"node {self.node_id}: transport is closed")
        if self._hub.stopped:
            raise TransportError(f"node {self.node_id}: the run was stopped")
