"""Gossip SGD with a choice of robust aggregation, as a plugin writes it: one local SGD step,
then the neighbourhood mixed by the rule the run names (`--set aggregation={rule:
clipped-gossip, delta: 0.3}`; docs/protocols/robust.md), the plain mean sum_j W_ij x_j by
default. The two lines that make a protocol robust are the `aggregation` field with the
`RobustAggregation` capability, and `robust_mix` where `mix` would be.

Formula bits: one dense float32 model per neighbour and round, deg_i P 32.
"""

from __future__ import annotations

import torch

from protocols.sdk import (
    DEFAULT_AGGREGATION,
    Aggregation,
    Exchange,
    LocalSGD,
    NodeContext,
    ProtocolNode,
    RobustAggregation,
    TrainingHyper,
    dense,
    robust_mix,
)


class RobustGossipHyper(TrainingHyper):
    aggregation: Aggregation = DEFAULT_AGGREGATION
    """The rule the neighbourhood is mixed with."""


class RobustGossip(ProtocolNode[RobustGossipHyper], capabilities=(RobustAggregation(),)):
    checkpoint_fields = ("sgd",)

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.sgd = LocalSGD(ctx, self.hyper.batch_size)
        self.gossip = Exchange(ctx, "gossip", learner=self.sgd)
        self.row = ctx.plan.weight_row(ctx.node_id)

    def run_round(self, r: int) -> dict[str, float]:
        metrics = {"train_loss": self.sgd.step(self.hyper.lr)}
        mine = {name: p.detach() for name, p in self.sgd.parameters().items()}
        theirs = self.gossip(r, dense(mine))
        mixed = robust_mix(self.hyper.aggregation, self.row, self.ctx.node_id, mine, theirs,
                           metrics)  # what the rule did joins the round's metrics
        with torch.no_grad():
            for name, p in self.sgd.parameters().items():
                p.copy_(mixed[name])
        return metrics
