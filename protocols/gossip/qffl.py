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

The round is the SDK's `Star`: the upload, the aggregator's gather, its answer to every client
and the clients' download. Formula bits: P 32 up and P 32 down per client and round,
B_client = 2 T P 32 (stated). The clock charges two synchronous steps of P 4 bytes (up with the
client's gradient, then down).
"""

from __future__ import annotations

import math

import torch

from protocols.gossip.declarations import QFFL_SPEC, QFFLHyper
from protocols.sdk import (
    LocalSGD,
    NodeContext,
    Payload,
    ProtocolNode,
    Star,
    dense,
    flatten,
    grad_of,
    unflatten_into,
)

UP, DOWN = "qffl-up", "qffl-down"


class QFFL(ProtocolNode[QFFLHyper]):
    spec = QFFL_SPEC

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        server = ctx.plan.aggregator
        if server is None:
            raise ValueError("qffl: the plan has no aggregator node")
        self.server: int = server
        self.params = list(ctx.model.parameters())
        size = sum(p.numel() for p in self.params)
        self.is_server = ctx.node_id == self.server
        if not self.is_server:
            self.checkpoint_fields = ("sgd",)
            self.sgd = LocalSGD(ctx, self.hyper.batch_size)
        # h_k travels as one float64 beside Delta_k and is not charged (the paper's 2 T P 32).
        self.star = Star(ctx, self.server,
                         up=(UP, {"delta": ("float32", (size,)), "h": ("float64", (1,))}),
                         down=(DOWN, {"w": ("float32", (size,))}),
                         learner=None if self.is_server else self.sgd, clock_bytes=4 * size)

    def run_round(self, r: int) -> dict[str, float]:
        return self.aggregate(r) if self.is_server else self.client_round(r)

    def client_round(self, r: int) -> dict[str, float]:
        hp = self.hyper
        loss = self.sgd.gradient()
        with torch.no_grad():
            g = flatten(grad_of(p) for p in self.params)
            norm = float(torch.linalg.vector_norm(g))
            if hp.grad_clip and norm > hp.grad_clip:
                g.mul_(hp.grad_clip / norm)
            dw = hp.lipschitz * hp.lr * g
            f_q = math.pow(loss, hp.q)
            h = hp.q * math.pow(loss, hp.q - 1) * float(dw @ dw) if hp.q else 0.0
            h += hp.lipschitz * f_q
        delta = dense({"delta": f_q * dw}, hp.accounting)
        h_k = torch.tensor([h], dtype=torch.float64)
        self.star.upload(r, Payload({**delta.tensors, "h": h_k}, delta.bits))
        w = self.star.download(r)["w"]
        unflatten_into(self.params, w.to(self.params[0].device))
        return {"train_loss": loss, "grad_norm": norm, "h": h}

    def aggregate(self, r: int) -> dict[str, float]:
        uploads = self.star.collect(r)
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
        self.star.answer(r, dense({"w": w_new}, self.hyper.accounting))
        return {"h_sum": h_sum}
