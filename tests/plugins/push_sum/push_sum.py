"""Push-Sum gossip SGD (Kempe et al., 2003; as a learning method, Assran et al., 2019, SGP):
each node keeps its model z and a weight w; every round it takes an SGD step on z, then pushes
the equal share (w z, w) / (d_i + 1) of x = w z to every neighbour and keeps one share itself:

    x_i <- sum over j in N(i) and i of x_j / (d_j + 1),   w_i <- the same sum of w_j / (d_j + 1),
    z_i <- x_i / w_i.

Where degrees differ the weights drift apart from 1, and z is the de-biased estimate. The weight
is state the next round reads beside the model: it is in `checkpoint_fields`.

Formula bits: one dense float message of P + 1 values (the scaled model and the weight) per
neighbour and round, (P + 1) 32 per directed link.
"""

from __future__ import annotations

import torch

from protocols.sdk import Exchange, LocalSGD, NodeContext, Payload, Protocol, TrainingHyper, dense


class PushSum(Protocol[TrainingHyper]):
    Hyper = TrainingHyper
    checkpoint_fields: tuple[str, ...] = ("sgd", "weight")

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.sgd = LocalSGD(ctx, self.hyper.batch_size)
        self.push = Exchange(ctx, "push", learner=self.sgd)
        self.share = 1.0 / (len(ctx.plan.neighbors(ctx.node_id)) + 1)
        self.weight = 1.0

    def run_round(self, r: int) -> dict[str, float]:
        loss = self.sgd.step(self.hyper.lr)
        params = self.sgd.parameters()
        scale = self.weight * self.share
        x = {name: p.detach() * scale for name, p in params.items()}
        w = torch.tensor([scale], dtype=torch.float64)
        theirs = self.push(r, self.message(x, w))
        senders = sorted(theirs)
        self.weight = float(sum((theirs[j]["w"] for j in senders), w))
        with torch.no_grad():
            for name, p in params.items():
                total = sum((theirs[j][name].to(p.device) for j in senders), x[name])
                p.copy_(total / self.weight)
        return {"train_loss": loss, "weight": self.weight}

    def message(self, x: dict[str, torch.Tensor], w: torch.Tensor) -> Payload:
        """The scaled model and the weight, each value 32 formula bits."""
        return dense({**x, "w": w})
