"""One push step on the round's arcs: send to the out-neighbours, gather the in-neighbours'.

The SDK's `Exchange` charges the formula ledger on the links a message came in on, which is
the same set only when every arc has its reverse. A push charges what it SENT, on each
out-arc of the round: this subclass is that one difference, kept here until the SDK's exchange
charges on sent links itself (then `Push` is `Exchange`).
"""

from __future__ import annotations

from dfl_node.comm.channel import Received
from dfl_node.wire.tags import Tag
from protocols.sdk import Exchange, Payload
from protocols.sdk.exchange import schema_of


class Push(Exchange):
    """`push(r, payload)`: the payload to every out-neighbour of round r (the runtime set them
    from the plan), the in-neighbours' payloads back by ascending id."""

    def __call__(self, r: int, payload: Payload, *,
                 compute_steps: int | None = None) -> dict[int, Received]:
        ctx = self.ctx
        if not self._schema_set:
            ctx.comm.set_schema(self.phase, schema_of(payload.tensors))
            self._schema_set = True
        theirs = ctx.comm.exchange(Tag("data", r, self.phase), payload.tensors)
        for j in ctx.comm.out_neighbors:
            ctx.formula.charge_all(r, j, payload.bits)
        if compute_steps is None:
            compute_steps = self.learner.take_steps() if self.learner is not None else 0
        ctx.clock.sync_step(payload.nbytes, compute_steps)
        return theirs
