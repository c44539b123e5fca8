"""q-FFL (Li, Sanjabi, Beirami & Smith, ICLR 2020) as q-FedSGD: the DMFL-SQ paper's fairness
reference. It is server-based, so the plan holds an aggregator node beside the clients (its own
process, address, log and `final/` file; never a client in fairness figures or bits per client).

One round t (docs/protocols/qffl.md; q = 1, L = 2, lr = 0.18, clip 0.5):

    client k  F_k = mean loss of one batch at w^t;  g_k = clip_norm(grad, 0.5)
              dw_k = L lr g_k;  Delta_k = F_k^q dw_k;  h_k = q F_k^{q-1} ||dw_k||^2 + L F_k^q
              uploads Delta_k (P float32) and h_k (one float64, not charged)
    server    w^{t+1} = w^t - (sum_k Delta_k) / (sum_k h_k)   (sums in sorted client order)
              sends w^{t+1} (P float32) to every client

w^0 is the run's shared initialisation, known to every node, so no broadcast precedes round 0
and round t's download carries w^{t+1}: each client then evaluates the global model on its own
test split, as the paper evaluates q-FFL. With q = 0 the update is FedSGD with step lr.

Formula bits: P 32 up and P 32 down per client and round, B_client = 2 T P 32 (stated).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from dfl_node.learning.flat import flatten, unflatten_into
from dfl_node.learning.training import BatchSampler, compute_gradients, grad_of
from dfl_node.runner.context import NodeContext
from dfl_node.wire.tags import Tag
from protocols.base import Protocol
from protocols.gossip.dense_bits import DenseAccounting, dense_link_bits
from protocols.hyper import HyperConfig

UP, DOWN = "qffl-up", "qffl-down"


@dataclass(frozen=True)
class QFFLConfig(HyperConfig):
    protocol_name = "qffl"
    lr: float = 0.18
    q: float = 1.0
    lipschitz: float = 2.0  # L
    grad_clip: float = 0.5  # 0 turns clipping off
    batch_size: int = 32
    accounting: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        self.number("lr", 0.0, strict=True)
        self.number("q", 0.0, strict=False)
        self.number("lipschitz", 0.0, strict=True)
        self.number("grad_clip", 0.0, strict=False)
        self.count("batch_size")
        self.mapping("accounting")
        DenseAccounting.from_mapping(self.accounting)


class QFFL(Protocol):
    server_based: ClassVar[bool] = True
    report_family = "dmfl-sq"  # compared in the DMFL-SQ paper's table

    @staticmethod
    def check_hyper(hyper: Mapping[str, Any]) -> None:
        QFFLConfig.from_hyper(hyper)

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.cfg = cfg = QFFLConfig.from_hyper(ctx.hyper)
        server = ctx.plan.aggregator
        if server is None:
            raise ValueError("qffl: the plan has no aggregator node")
        self.server: int = server
        self.params = list(ctx.model.parameters())
        size = sum(p.numel() for p in self.params)
        ctx.comm.set_schema(UP, {"delta": ("float32", (size,)), "h": ("float64", (1,))})
        ctx.comm.set_schema(DOWN, {"w": ("float32", (size,))})
        self.link_bits = dense_link_bits(1, size, DenseAccounting.from_mapping(cfg.accounting))
        self.message_bytes = 4 * size
        self.is_server = ctx.node_id == self.server
        if not self.is_server:
            self.checkpoint_fields = ("batches",)
            self.batches = BatchSampler(ctx.data.x_train, ctx.data.y_train, cfg.batch_size,
                                        ctx.rng("batches"), ctx.device)

    def run_round(self, r: int) -> dict[str, float]:
        info = self.aggregate(r) if self.is_server else self.client_round(r)
        self.ctx.clock.sync_step(self.message_bytes, 0 if self.is_server else 1)  # up
        self.ctx.clock.sync_step(self.message_bytes, 0)  # down
        return info

    def client_round(self, r: int) -> dict[str, float]:
        ctx, cfg = self.ctx, self.cfg
        loss = compute_gradients(ctx.model, *self.batches.next())
        with torch.no_grad():
            g = flatten(grad_of(p) for p in self.params)
            norm = float(torch.linalg.vector_norm(g))
            if cfg.grad_clip and norm > cfg.grad_clip:
                g.mul_(cfg.grad_clip / norm)
            dw = cfg.lipschitz * cfg.lr * g
            f_q = math.pow(loss, cfg.q)
            h = cfg.q * math.pow(loss, cfg.q - 1) * float(dw @ dw) if cfg.q else 0.0
            h += cfg.lipschitz * f_q
        ctx.comm.send(self.server, Tag("data", r, UP),
                      {"delta": f_q * dw, "h": np.array([h], dtype=np.float64)})
        ctx.formula.charge_all(r, self.server, self.link_bits)
        w = ctx.comm.recv(self.server, Tag("data", r, DOWN))["w"]
        unflatten_into(self.params, w.to(self.params[0].device))
        return {"train_loss": loss, "grad_norm": norm, "h": h}

    def aggregate(self, r: int) -> dict[str, float]:
        ctx = self.ctx
        uploads = ctx.comm.gather_neighbors(Tag("data", r, UP))
        with torch.no_grad():
            w = flatten(self.params)
            total = torch.zeros_like(w)
            h_sum = 0.0
            for k in sorted(uploads):
                total.add_(uploads[k]["delta"].to(w.device))
                h_sum += float(uploads[k]["h"][0])
            if not h_sum > 0 or not math.isfinite(h_sum):
                raise FloatingPointError(f"qffl: sum of h_k is {h_sum} at round {r}")
            w_new = w - total / h_sum
            unflatten_into(self.params, w_new)
        ctx.comm.broadcast(Tag("data", r, DOWN), {"w": w_new})
        for k in sorted(uploads):
            ctx.formula.charge_all(r, k, self.link_bits)
        return {"h_sum": h_sum}
