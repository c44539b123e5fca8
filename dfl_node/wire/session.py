"""One node's wire: its messages in the compact form, and the layouts each neighbour defined.

`Comm` holds one `Session`. A message is prepared once (`encode`) and checked there by the very
decoder its receivers run, against the layouts a receiver of every message this node sent
would hold; `frames` then gives each destination the smallest form it can read, with the
header bytes its ledger counts (the receiver's ledger counts the same). `decode` reads a
neighbour's message, in either form, against what that neighbour defined.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dfl_node.wire.codec import decode
from dfl_node.wire.compact import Encoder, Layouts, Outgoing
from dfl_node.wire.message import Frame, Message, WireError, WireLimits
from dfl_node.wire.tags import Tag

_SELF = -1  # the destination that stands for the sender's own check (node ids are >= 0)


class Session:
    def __init__(self, limits: WireLimits) -> None:
        self.limits = limits
        self._encoder = Encoder()
        self._own = Layouts()  # what a receiver of every message sent would hold
        self._theirs: dict[int, Layouts] = {}

    def encode(self, src: int, tag: Tag, tensors: Mapping[str, np.ndarray],
               codec: str = "raw") -> tuple[Outgoing, Message]:
        """The message prepared for any destinations, and what its receivers will decode (the
        tensors as views of the encoded bytes). ValueError or TypeError for what the wire
        cannot carry; WireError for what a receiver would refuse."""
        out = self._encoder.prepare(src, tag, tensors, codec)
        frames, _ = out.frames(self._encoder.mode(_SELF, out))
        try:
            return out, decode(frames, self.limits, self._own)
        except WireError:
            self._encoder.forget(_SELF)  # the check stored nothing: define it again next time
            raise

    def frames(self, dst: int, out: Outgoing) -> tuple[list[Frame], int]:
        """`out` as `dst` can read it, and its header bytes; `dst` is taken to receive it."""
        return out.frames(self._encoder.mode(dst, out))

    def decode(self, peer: int, frames: list[Frame]) -> Message:
        """A message that came in on `peer`'s connection (WireError if refused)."""
        layouts = self._theirs.get(peer)
        if layouts is None:
            layouts = self._theirs[peer] = Layouts()
        return decode(frames, self.limits, layouts)

    def restart(self) -> None:
        """Every destination gets every layout defined again from the next message on, so what
        follows goes out byte for byte as it does from a node started afresh (a resumed one)."""
        self._encoder.restart()
        self._own = Layouts()

    def lost(self, dst: int) -> None:
        """What was queued for `dst` was dropped, definitions perhaps among it: define again."""
        self._encoder.forget(dst)

    def drop(self, peer: int) -> None:
        """`peer` has left the mesh: nothing more goes to it or comes from it."""
        self._encoder.forget(peer)
        self._theirs.pop(peer, None)
