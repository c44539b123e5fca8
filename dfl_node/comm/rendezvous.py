"""Rendezvous: nodes started in any order, minutes apart, on hosts that share no clock.

Nothing here compares clocks across hosts. A node's DEALERs keep reconnecting to neighbours
that are not up yet (ZeroMQ retries on its own) and its first messages queue until they are, so
meeting the mesh is only a matter of waiting long enough. The waits of the start-up (the plan
agreement with each neighbour, the mesh-wide start barrier) therefore share one deadline,
`wire.rendezvous_s` after this node started, on this host's monotonic clock; every later wait
keeps the ordinary `wire.recv_timeout_s`. Rounds and TDMA slots are logical: a node moves on
when its neighbours' messages are here, never at a time of day.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from dfl_config.errors import DflMeshError
from dfl_node.comm.channel import Comm, PeerTimeout


class RendezvousTimeout(TimeoutError, DflMeshError):
    """Neighbours did not show up before the rendezvous deadline; the message is one line."""


def deadline_after(seconds: float) -> float:
    """A deadline on this host's monotonic clock (immune to wall-clock steps)."""
    return time.monotonic() + seconds


@contextmanager
def patience(comm: Comm, deadline: float, seconds: float) -> Iterator[None]:
    """Within the block, `comm`'s next wait lasts until `deadline`; a neighbour that is still
    missing then is named in a RendezvousTimeout. Use one block per wait."""
    saved = comm.recv_timeout_s
    comm.recv_timeout_s = max(deadline - time.monotonic(), 0.0)
    try:
        yield
    except PeerTimeout as exc:
        raise RendezvousTimeout(
            f"node {comm.node_id}: node(s) {list(exc.missing)} did not join within the "
            f"rendezvous deadline ({seconds:g} s, wire.rendezvous_s)") from None
    finally:
        comm.recv_timeout_s = saved
