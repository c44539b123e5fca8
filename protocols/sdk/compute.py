"""A synchronous step in which no message travels: local computation timed on its own.

Where a paper's round times the local computation as a step apart from the exchanges that
follow (DMFL-SQ's gradient before its consensus sub-rounds, DSC's E local epochs before its
control frame), or a round has no exchange at all (DSC's no-aggregation reference), the
protocol ends that computation with a `ComputeStep`; everywhere else the compute belongs to the
next exchange's step (`Exchange(learner=...)`) and needs no call.
"""

from __future__ import annotations

from dfl_node.runner.context import NodeContext
from protocols.sdk.learning import LocalSGD


class ComputeStep:
    """`compute()`: one step of the learner's counted local steps alone (`compute(n)`: n)."""

    def __init__(self, ctx: NodeContext, learner: LocalSGD | None = None) -> None:
        self.ctx, self.learner = ctx, learner

    def __call__(self, steps: int | None = None) -> None:
        if steps is None:
            if self.learner is None:
                raise ValueError("ComputeStep: no learner counts the steps; pass them")
            steps = self.learner.take_steps()
        self.ctx.clock.sync_step(0, steps)
