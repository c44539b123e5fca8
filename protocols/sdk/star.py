"""A star: clients to an aggregator and back, two synchronous steps per round.

Server-based protocols (q-FFL) run their round through an aggregator node the launcher adds to
the plan: every client sends its upload to it (`upload`), the aggregator takes them all
(`collect`), answers every client with one message (`answer`), and each client takes it
(`download`). Each of the four is a step of its own with the duties of `Exchange`: the formula
ledger is charged on the links sent on, the clock advances at the step's end. A node receives
a phase here that it never sends, so the star declares both messages' layouts up front.
"""

from __future__ import annotations

from collections.abc import Mapping

from dfl_node.comm.channel import Layout, Received
from protocols.sdk.exchange import Exchange, StepContext
from protocols.sdk.learning import LocalSGD
from protocols.sdk.payload import Payload


class Star:
    """The aggregator `aggregator`'s star; `up` and `down` name the two phases."""

    def __init__(self, ctx: StepContext, aggregator: int, *,
                 up: tuple[str, Mapping[str, Layout]], down: tuple[str, Mapping[str, Layout]],
                 learner: LocalSGD | None = None, clock_bytes: int | None = None) -> None:
        """`up`, `down`: (phase, layout) of the clients' uploads and the aggregator's answer;
        `learner`: whose counted steps are the compute of the upload step (a client's);
        `clock_bytes`: the size the clock charges per step (each message's own by default)."""
        self.aggregator = aggregator
        self.up = Exchange(ctx, up[0], schema=up[1], learner=learner, clock_bytes=clock_bytes)
        self.down = Exchange(ctx, down[0], schema=down[1], clock_bytes=clock_bytes)

    def upload(self, r: int, payload: Payload) -> None:
        """A client's message to the aggregator (the up step)."""
        self.up.send(r, payload, to=self.aggregator)

    def download(self, r: int) -> Received:
        """The aggregator's answer, at a client (the down step)."""
        return self.down.gather(r, frm=(self.aggregator,))[self.aggregator]

    def collect(self, r: int) -> dict[int, Received]:
        """Every client's upload, by ascending id, at the aggregator (the up step)."""
        return self.up.gather(r)

    def answer(self, r: int, payload: Payload) -> None:
        """The aggregator's one message to every client (the down step)."""
        self.down.send(r, payload)
