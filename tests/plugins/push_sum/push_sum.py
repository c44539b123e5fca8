"""Push-Sum gossip SGD (Kempe et al., 2003; as a learning method, Assran et al., 2019, SGP) on
any graph, directed and time-varying ones too: each node keeps its model z and a weight w;
every round it takes an SGD step on z, then splits (w z, w) evenly over itself and the round's
d_out out-neighbours, pushes one share to each and keeps one:

    x_i <- sum over i and its in-neighbours j of w_j z_j / (d_out(j) + 1),
    w_i <- the same sum of w_j / (d_out(j) + 1),    z_i <- x_i / w_i.

Where out-degrees differ the weights drift apart from 1, and z is the de-biased estimate. The
weight is state the next round reads beside the model: it is in `checkpoint_fields`.

Formula bits: one dense float message of P + 1 values (the scaled model and the weight) per
out-arc and round, (P + 1) 32 per arc.
"""

from __future__ import annotations

import torch

from protocols.sdk import (
    DynamicGraphs,
    Exchange,
    LocalSGD,
    NodeContext,
    Payload,
    ProtocolNode,
    TrainingHyper,
    dense,
)


class PushSum(ProtocolNode[TrainingHyper], capabilities=(DynamicGraphs(),)):
    checkpoint_fields: tuple[str, ...] = ("sgd", "weight")

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.sgd = LocalSGD(ctx, self.hyper.batch_size)
        self.push = Exchange(ctx, "push", learner=self.sgd)  # to the round's out-neighbours
        self.weight = 1.0

    def run_round(self, r: int) -> dict[str, float]:
        loss = self.sgd.step(self.hyper.lr)
        params = self.sgd.parameters()
        share = self.weight / (len(self.push.out_neighbours) + 1)
        x = {name: p.detach() * share for name, p in params.items()}
        w = torch.tensor([share], dtype=torch.float64)
        theirs = self.push(r, self.message(x, w)).values()  # by ascending sender id
        self.weight = float(sum((m["w"] for m in theirs), w))
        with torch.no_grad():
            for name, p in params.items():
                total = sum((m[name].to(p.device) for m in theirs), x[name])
                p.copy_(total / self.weight)
        return {"train_loss": loss, "weight": self.weight}

    def message(self, x: dict[str, torch.Tensor], w: torch.Tensor) -> Payload:
        """The scaled model and the weight, each value 32 formula bits."""
        return dense({**x, "w": w})
