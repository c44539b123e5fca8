"""Stochastic Gradient Push (Assran, Loizou, Ballas and Rabbat, ICML 2019, "Stochastic
Gradient Push for Distributed Deep Learning"), Algorithm 1: SGD on Push-Sum gossip, which
averages over directed and time-varying graphs where doubly-stochastic weights do not exist.

Node i holds a numerator x_i and a Push-Sum weight w_i (x_i^(0) = z_i^(0), w_i^(0) = 1); its
model, what it evaluates and saves, is the de-biased z_i = x_i / w_i. Round k:

    x_i^(k+1/2) = x_i^(k) - gamma grad F_i(z_i^(k); xi_i^(k))          (local step at z)
    x_i^(k+1)   = sum_j p_ij^(k) x_j^(k+1/2)                           (Push-Sum, numerator)
    w_i^(k+1)   = sum_j p_ij^(k) w_j^(k)                               (Push-Sum, weight)
    z_i^(k+1)   = x_i^(k+1) / w_i^(k+1)

with P^(k) column-stochastic on round k's graph: p_ij = 1 / (1 + d_out(j)) on j = i and on
each in-neighbour j of i (the paper's uniform choice; `push_row`). Node j sends
(x_j^(k+1/2), w_j^(k)) to its out-neighbours; each receiver scales it by p_ij, whose d_out(j)
it knows from the plan, and sums over j ascending (exact under every transport).

Formula bits (docs/protocols/sgp.md#formula-bits): (P + 1) b_fp per out-arc and round, plus
`accounting.b_hdr` per message.
"""

from __future__ import annotations

import torch

from protocols.dynamic.declarations import SGP_SPEC, SGPHyper
from protocols.sdk import Exchange, LocalSGD, NodeContext, ProtocolNode, dense, grad_of, mix
from protocols.sdk.mixing import push_row

WEIGHT = "push_weight"  # the Push-Sum weight's name in a message, beside the parameters'


class SGP(ProtocolNode[SGPHyper]):
    spec = SGP_SPEC
    checkpoint_fields = ("sgd", "x", "w")

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.sgd = LocalSGD(ctx, self.hyper.batch_size)
        self.push = Exchange(ctx, "push", learner=self.sgd)
        self.x = {n: p.detach().clone() for n, p in self.sgd.parameters().items()}
        self.w = torch.ones(1, dtype=torch.float32)

    def run_round(self, r: int) -> dict[str, float]:
        ctx, me = self.ctx, self.ctx.node_id
        loss = self.sgd.gradient()  # at z_i^(k), the model
        with torch.no_grad():
            for name, p in self.sgd.parameters().items():
                self.x[name].sub_(grad_of(p), alpha=self.hyper.lr)
        mine = {**self.x, WEIGHT: self.w}
        theirs = self.push(r, dense(mine, self.hyper.accounting))
        row = push_row(me, ctx.comm.in_neighbors,
                       lambda j: len(ctx.plan.out_neighbors(j, r)))
        mixed = mix(row, me, mine, theirs)
        self.w = mixed.pop(WEIGHT)
        self.x = mixed
        with torch.no_grad():
            for name, p in self.sgd.parameters().items():
                p.copy_(self.x[name] / self.w)
        return {"train_loss": loss, "push_weight": float(self.w)}
