"""One step of a synchronous exchange, with the runtime's duties done on the protocol's behalf.

What a protocol used to do by hand around `comm.exchange`, and could forget without any error:
- declare the message schema (here: from the first payload, dtype and shape of every tensor,
  unless the payload varies per message and a validator is given instead);
- charge the formula ledger on every link the message crossed (the payload's own bits);
- advance the virtual clock by one synchronous step: the local steps `LocalSGD` counted since
  the previous exchange, and the bytes the message's tensors put on the link (under TDMA the
  comm layer charges the frame itself, and only the compute is added).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from dfl_node.comm.channel import Received, Validator
from dfl_node.runner.context import NodeContext
from dfl_node.wire.tags import Tag
from protocols.sdk.learning import LocalSGD
from protocols.sdk.payload import Payload


class Exchange:
    """`exchange(r, payload)`: send to every neighbour, return theirs by ascending id."""

    def __init__(self, ctx: NodeContext, phase: str, *, learner: LocalSGD | None = None,
                 validator: Validator | None = None, clock_bytes: int | None = None) -> None:
        """`learner`: whose counted steps are the compute of each step (none: no compute);
        `validator`: for payloads whose shapes vary per message (comm.set_validator);
        `clock_bytes`: a fixed size the clock charges per message (the largest message, for
        protocols whose paper times the worst case), instead of the payload's own bytes."""
        self.ctx, self.phase, self.learner = ctx, phase, learner
        self.clock_bytes = clock_bytes
        self._schema_set = validator is not None
        if validator is not None:
            ctx.comm.set_validator(phase, validator)

    def __call__(self, r: int, payload: Payload, *,
                 compute_steps: int | None = None) -> dict[int, Received]:
        ctx = self.ctx
        if not self._schema_set:
            ctx.comm.set_schema(self.phase, schema_of(payload.tensors))
            self._schema_set = True
        theirs = ctx.comm.exchange(Tag("data", r, self.phase), payload.tensors)
        for j in theirs:
            ctx.formula.charge_all(r, j, payload.bits)
        if compute_steps is None:
            compute_steps = self.learner.take_steps() if self.learner is not None else 0
        size = self.clock_bytes if self.clock_bytes is not None else payload.nbytes
        ctx.clock.sync_step(size, compute_steps)
        return theirs


def schema_of(tensors: Mapping[str, torch.Tensor]) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {name: (str(t.dtype).removeprefix("torch."), tuple(t.shape))
            for name, t in tensors.items()}
