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

Formula bits: deg_i 2 P 32 per round (docs/protocols/dmfl-sq.md#a17).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from dfl_node.learning.flat import flatten, unflatten_into
from dfl_node.learning.seeds import torch_stream
from dfl_node.learning.training import BatchSampler, compute_gradients, grad_of
from dfl_node.runner.context import NodeContext
from dfl_node.wire.tags import Tag
from protocols.base import Protocol
from protocols.gossip.dense_bits import DenseAccounting, dense_link_bits
from protocols.hyper import HyperConfig

PHASE = "dsgt"


@dataclass(frozen=True)
class DSGTConfig(HyperConfig):
    protocol_name = "dsgt"
    lr: float = 0.045
    tracker_clip: float = 1.2
    batch_size: int = 32
    accounting: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        self.number("lr", 0.0, strict=True)
        self.number("tracker_clip", 0.0, strict=False)
        self.count("batch_size")
        self.mapping("accounting")
        DenseAccounting.from_mapping(self.accounting)


class DSGT(Protocol):
    report_family = "dmfl-sq"  # compared in the DMFL-SQ paper's table
    checkpoint_fields = ("batches", "y", "g_prev")

    @staticmethod
    def check_hyper(hyper: Mapping[str, Any]) -> None:
        DSGTConfig.from_hyper(hyper)

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.cfg = cfg = DSGTConfig.from_hyper(ctx.hyper)
        self.params = list(ctx.model.parameters())
        self.weights = ctx.plan.weight_row(ctx.node_id)
        self.batches = BatchSampler(ctx.data.x_train, ctx.data.y_train, cfg.batch_size,
                                    ctx.rng("batches"), ctx.device)
        size = sum(p.numel() for p in self.params)
        ctx.comm.set_schema(PHASE, {"z": ("float32", (size,)), "y": ("float32", (size,))})
        self.link_bits = dense_link_bits(2, size, DenseAccounting.from_mapping(cfg.accounting))
        self.message_bytes = 2 * 4 * size
        # The one extra gradient of the initialisation: y^0 = g_prev = g(x^0; B^0).
        self.g_prev = self.gradient()[1]
        self.y = self.g_prev.clone()
        gen = torch_stream(ctx.plan.seed, -1, "dsgt/probe")
        self.probe = torch.randn(size, generator=gen).to(self.y.device)

    def gradient(self) -> tuple[float, torch.Tensor]:
        loss = compute_gradients(self.ctx.model, *self.batches.next())
        return loss, flatten(grad_of(p) for p in self.params)

    def alpha(self, r: int) -> float:
        return self.cfg.lr / math.sqrt(r + 1)

    def run_round(self, r: int) -> dict[str, float]:
        ctx, me = self.ctx, self.ctx.node_id
        with torch.no_grad():
            z = flatten(self.params) - self.alpha(r) * self.y
        theirs = ctx.comm.exchange(Tag("data", r, PHASE), {"z": z, "y": self.y})
        with torch.no_grad():
            x_new, y_mix = torch.zeros_like(z), torch.zeros_like(z)
            for j, w_ij in self.weights.items():
                x_new.add_(z if j == me else theirs[j]["z"].to(z.device), alpha=w_ij)
                y_mix.add_(self.y if j == me else theirs[j]["y"].to(z.device), alpha=w_ij)
            unflatten_into(self.params, x_new)
        loss, g_new = self.gradient()
        with torch.no_grad():
            self.y = y_mix + g_new - self.g_prev
            self.g_prev = g_new
            clipped = self.clip()
        for j in theirs:
            ctx.formula.charge_all(r, j, self.link_bits)
        ctx.clock.sync_step(self.message_bytes, 1)
        return {"train_loss": loss, "alpha": self.alpha(r), "tracker_clipped": float(clipped),
                "tracker_probe": float(self.probe @ self.y),
                "grad_probe": float(self.probe @ self.g_prev)}

    def clip(self) -> bool:
        """y <- y min(1, c / ||y||); True when it acted."""
        c = self.cfg.tracker_clip
        norm = float(torch.linalg.vector_norm(self.y))
        if c and norm > c:
            self.y.mul_(c / norm)
            return True
        return False

    def extra_state(self) -> dict[str, torch.Tensor]:
        return {"tracker": self.y.detach().cpu(), "last_gradient": self.g_prev.detach().cpu()}
