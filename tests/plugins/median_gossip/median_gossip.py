"""Coordinate-wise median gossip: local SGD, then each parameter becomes the median of this
node's and its neighbours' values (a robust alternative to the W-weighted mean of D-PSGD).

Formula bits: one dense float32 model per neighbour and round, deg_i P 32.
"""

from __future__ import annotations

import torch

from dfl_config.section import Count
from protocols.sdk import Exchange, LocalSGD, NodeContext, ProtocolNode, TrainingHyper, dense


class MedianHyper(TrainingHyper):
    local_steps: Count = 1
    """SGD steps before each exchange."""


class MedianGossip(ProtocolNode[MedianHyper]):
    checkpoint_fields = ("sgd",)

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.sgd = LocalSGD(ctx, self.hyper.batch_size)
        self.gossip = Exchange(ctx, "median", learner=self.sgd)

    def run_round(self, r: int) -> dict[str, float]:
        losses = [self.sgd.step(self.hyper.lr) for _ in range(self.hyper.local_steps)]
        mine = {name: p.detach() for name, p in self.sgd.parameters().items()}
        theirs = self.gossip(r, dense(mine))
        with torch.no_grad():
            for name, p in self.sgd.parameters().items():
                values = [mine[name], *(theirs[j][name].to(p.device) for j in sorted(theirs))]
                p.copy_(torch.stack(values).median(dim=0).values)
        return {"train_loss": losses[-1]}
