"""DSGT: decentralized stochastic gradient tracking (Pu & Nedic), the DMFL-SQ paper's ref. [32].

Adapt-then-combine form (docs/protocols/dsgt.md, docs/protocols/dmfl-sq.md#a16), at node i:

    init     y_i^0 = g_i(x^0; B^0)             (one extra gradient; no communication)
    round t  send z_i = x_i - alpha_t y_i and y_i to every neighbour (two dense vectors)
             x_i <- sum_j W_ij z_j
             g_new = g_i(x_i; B^{t+1})
             y_i <- sum_j W_ij y_j + g_new - g_prev;   g_prev = g_new
             y_i <- y_i min(1, c / ||y_i||)        (tracker clipping, c = 1.2; 0 turns it off)

with alpha_t = lr / sqrt(t + 1) (lr = 0.045). Without clipping and with a doubly stochastic W,
sum_i y_i = sum_i g_prev_i after every round: the tracker follows the network's mean gradient.
Clipping breaks that identity whenever it acts, which is why it is an option. Each round reports
`tracker_probe` and `grad_probe`, the projections <v, y_i> and <v, g_prev_i> on one random
direction v shared by all nodes: summed over nodes they must agree, a check of the tracking
identity that needs no vector beyond the node.

Formula bits: deg_i 2 P 32 per round (docs/protocols/dmfl-sq.md#a17). The clock charges the
float32 message, 2 P 4 bytes, and one gradient per round (the initial one is paid in round 0).
"""

from __future__ import annotations

import math

import torch

from protocols.gossip.declarations import DSGT_SPEC, DSGTHyper
from protocols.sdk import (
    Exchange,
    LocalSGD,
    NodeContext,
    ProtocolNode,
    dense,
    flatten,
    grad_of,
    mix,
    torch_stream,
    unflatten_into,
)


class DSGT(ProtocolNode[DSGTHyper]):
    spec = DSGT_SPEC
    checkpoint_fields = ("sgd", "y", "g_prev")

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.params = list(ctx.model.parameters())
        self.weights = ctx.plan.weight_row(ctx.node_id)
        self.sgd = LocalSGD(ctx, self.hyper.batch_size)
        size = sum(p.numel() for p in self.params)
        self.gossip = Exchange(ctx, "dsgt", learner=self.sgd)
        # The one extra gradient of the initialisation: y^0 = g_prev = g(x^0; B^0).
        self.g_prev = self.gradient()[1]
        self.y = self.g_prev.clone()
        gen = torch_stream(ctx.plan.seed, -1, "dsgt/probe")
        self.probe = torch.randn(size, generator=gen).to(self.y.device)

    def gradient(self) -> tuple[float, torch.Tensor]:
        loss = self.sgd.gradient()
        return loss, flatten(grad_of(p) for p in self.params)

    def alpha(self, r: int) -> float:
        return self.hyper.lr / math.sqrt(r + 1)

    def run_round(self, r: int) -> dict[str, float]:
        with torch.no_grad():
            z = flatten(self.params) - self.alpha(r) * self.y
        mine = {"z": z, "y": self.y}
        theirs = self.gossip(r, dense(mine, self.hyper.accounting))
        mixed = mix(self.weights, self.ctx.node_id, mine, theirs)
        with torch.no_grad():
            unflatten_into(self.params, mixed["z"])
        loss, g_new = self.gradient()
        with torch.no_grad():
            self.y = mixed["y"] + g_new - self.g_prev
            self.g_prev = g_new
            clipped = self.clip()
        return {"train_loss": loss, "alpha": self.alpha(r), "tracker_clipped": float(clipped),
                "tracker_probe": float(self.probe @ self.y),
                "grad_probe": float(self.probe @ self.g_prev)}

    def clip(self) -> bool:
        """y <- y min(1, c / ||y||); True when it acted."""
        c = self.hyper.tracker_clip
        norm = float(torch.linalg.vector_norm(self.y))
        if c and norm > c:
            self.y.mul_(c / norm)
            return True
        return False

    def extra_state(self) -> dict[str, torch.Tensor]:
        return {"tracker": self.y.detach().cpu(), "last_gradient": self.g_prev.detach().cpu()}
