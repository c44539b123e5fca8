"""SSD-FL (Wang, Chiang, Poor): serverless semi-decentralized FL with heterogeneous optimizers.
The paper's equations mapped to this code: docs/protocols/ssd-fl.md.

Pre-phase (once, Sec. V): each device reports its degree, label frequencies Y_i, a raw sample
D_i, its optimizer (opt_i, mu_i, rho_i) and L_i(theta^{0,0}) to the one-time coordinator
(`protocols/ssdfl/coordinator.py`), which runs Algorithms 1-2 and answers with the device's
cluster id and both weight rows: a~_i (Metropolis-Hastings on the cluster's induced subgraph)
and a_i (the plan's global matrix). All devices start from the same theta^{0,0} (shared init).

One global cycle k (`--rounds` counts cycles) at device i:
  intra regime, q = 0..tau_a-1 (eq. 11): theta_i^{q+1} = sum_j a~_ji theta_j^q - eta g~_i(theta_i^q)
     with in-cluster neighbours only; the gradient is taken at the device's own pre-mix model
     and the neighbours' pre-update models are mixed; g~ is eq. 10 (`direction.py`),
     its momentum sum and proximal anchor reset at q = 0 (eqs. 8-9).
  inter regime, q = 0..tau_r-1 (eq. 18): theta_i^{q+1} = sum_j a_ji theta_j^q, all neighbours,
     no training.
A device with no in-cluster neighbour (a~_ii = 1) trains alone in the intra regime and sends
nothing; its neighbours expect nothing from it, so no step waits on it.

One "iteration" is `local_steps` mini-batch steps ("epoch": ceil(D_i / M) of them,
docs/protocols/ssd-fl.md#e1). For
E > 1 steps the multi-step form theta_i^{q+1} = sum_j a~_ji theta_j^q - (theta_i^q - theta_i^{q,E})
applies, with the optimizer state spanning the regime; E = 1 is eq. 11 exactly. `regimes:
global` mixes with the global matrix in both regimes (synchronous DFL; the sDFL baseline and the
S = 1 check). Neighbour sums run over ascending ids, self included (the SDK's `mix`), so every
transport computes the same floats.

The cycle is `CycleEngine`'s; the baselines (`baselines.py`) run it with other weight
rows, and `SSDFL` adds the pre-phase that chooses its rows. Their settings, and what the launcher
and the coordinator run (Algorithm 1 included), are declared in `declarations.py`, without torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import torch

from protocols.sdk import (
    Exchange,
    LocalSGD,
    NodeContext,
    ProtocolNode,
    dense,
    evaluate,
    grad_of,
    mix,
)
from protocols.ssdfl.declarations import SSDFL_SPEC, CycleHyper, H, SSDFLHyper
from protocols.ssdfl.direction import UnifiedDirection
from protocols.ssdfl.optimizers import OptimizerConfig, draw_optimizer

INTRA, INTER = "ssdfl-intra", "ssdfl-inter"
Row = dict[int, float]
Params = dict[str, torch.Tensor]


class CycleEngine(ProtocolNode[H]):
    """One global cycle, tau_a iterations of eq. 11 then tau_r of eq. 18, on weight rows that
    SSD-FL and each baseline choose (`intra_row_at`, `inter_row_at`)."""

    # the optimizer state restarts every cycle (eqs. 8-9); the rows are kept, so a resumed
    # SSD-FL node needs no coordinator
    checkpoint_fields: tuple[str, ...] = ("sgd", "cluster", "intra_row", "inter_row")

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.params = dict(ctx.model.named_parameters())
        self.sgd = LocalSGD(ctx, self.hyper.batch_size)
        self.local_steps = steps_per_iteration(self.hyper.local_steps, len(ctx.data.y_train),
                                               self.sgd.batches.batch_size)
        self.optimizer = node_optimizer(ctx, self.hyper)
        self.direction = UnifiedDirection(self.optimizer)
        # Each iteration is one synchronous step on the row's neighbours: a dense model per
        # directed link, 32 bits a value (docs/protocols/sdfl.md#bits).
        self.intra = Exchange(ctx, INTRA, learner=self.sgd)
        self.inter = Exchange(ctx, INTER)
        self.cluster = -1
        self.intra_row: Row = {}
        self.inter_row: Row = {}

    def run_round(self, r: int) -> dict[str, float]:
        tau_a, tau_r = self.hyper.tau_a, self.hyper.tau_r
        self.direction.reset(self.params)  # eqs. 8-9: anchor and momentum start at q = 0
        losses = [self.intra_iteration(r, q) for q in range(tau_a)]
        for q in range(tau_r):
            self.inter_iteration(r, q)
        info: dict[str, float] = {
            "cluster": self.cluster, "iterations": (r + 1) * (tau_a + tau_r),
            "local_steps_per_iteration": self.local_steps}
        if losses:  # pure gossip (a baseline's tau_a = 0) trains nothing
            info["train_loss"] = sum(losses) / len(losses)
        return info

    def intra_row_at(self, r: int, q: int) -> Row:
        """The weight row of intra iteration q of cycle r (fixed for SSD-FL; baselines vary it)."""
        return self.intra_row

    def inter_row_at(self, r: int, q: int) -> Row:
        return self.inter_row

    def intra_iteration(self, r: int, q: int) -> float:
        """Eq. 11: mix the in-cluster neighbours' theta^q, minus the local update at theta_i^q."""
        row = self.intra_row_at(r, q)
        mine = {n: p.detach().clone() for n, p in self.params.items()}
        sent = self.intra.post(r, dense(mine), to=self.peers(row), step=q)
        update, loss = self.local_update()  # while theta_i^q travels
        mixed = mix(row, self.ctx.node_id, mine, sent.gather())
        with torch.no_grad():
            for name, p in self.params.items():
                p.copy_(mixed[name] - update[name])
        return loss

    def inter_iteration(self, r: int, q: int) -> None:
        """Eq. 18: theta_i <- sum_j a_ji theta_j over the row's neighbours; no training."""
        row = self.inter_row_at(r, q)
        mine = {n: p.detach().clone() for n, p in self.params.items()}
        sent = self.inter.post(r, dense(mine), to=self.peers(row), step=q)
        mixed = mix(row, self.ctx.node_id, mine, sent.gather())
        with torch.no_grad():
            for name, p in self.params.items():
                p.copy_(mixed[name])

    def peers(self, row: Row) -> list[int]:
        """The row's neighbours: whom theta_i^q goes to and whose theta_j^q is mixed (rows are
        symmetric). A subset of the neighbours that changes per iteration."""
        return [j for j in row if j != self.ctx.node_id]

    def local_update(self) -> tuple[Params, float]:
        """theta_i^q - theta_i^{q,E} after E optimizer steps from theta_i^q (eta g~ for E = 1)."""
        update: Params = {}
        losses = []
        for _ in range(self.local_steps):
            losses.append(self.sgd.gradient())
            with torch.no_grad():
                for name, p in self.params.items():
                    step = self.hyper.lr * self.direction.direction(name, grad_of(p), p)
                    p.sub_(step)
                    update[name] = update[name] + step if name in update else step
        return update, sum(losses) / len(losses)

    def summary(self) -> dict[str, float | dict[str, float]]:
        return {"iterations_per_cycle": float(self.hyper.tau_a + self.hyper.tau_r),
                "local_steps_per_iteration": float(self.local_steps)}


class SSDFL(CycleEngine[SSDFLHyper]):
    spec = SSDFL_SPEC

    # ---- pre-phase (Sec. V; docs/protocols/ssd-fl.md#pre-phase) ----

    def prephase_report(self) -> dict[str, np.ndarray]:
        """What the paper's devices share: degree, Y_i, a raw sample, optimizer, L_i(theta^0)."""
        data, ctx = self.ctx.data, self.ctx
        size = self.hyper.sample_size
        rng = ctx.rng("prephase/sample")
        idx = np.sort(rng.choice(len(data.y_train), size, replace=len(data.y_train) < size))
        hist = np.bincount(data.y_train, minlength=data.classes).astype(np.float64)
        x, y = data.x_train, data.y_train
        if self.hyper.loss_sample is not None and self.hyper.loss_sample < len(y):
            rows = np.sort(ctx.rng("prephase/loss").choice(len(y), self.hyper.loss_sample,
                                                           replace=False))
            x, y = x[rows], y[rows]
        _, loss = evaluate(ctx.model, x, y, ctx.device)
        return {
            "degree": np.array(len(ctx.comm.neighbors), dtype=np.int64),
            "label_hist": hist / hist.sum(),
            "sample": np.ascontiguousarray(data.x_train[idx].reshape(size, -1), np.float32),
            "optimizer": self.optimizer.to_array(),
            "init_loss": np.array(loss, dtype=np.float64),
        }

    def prephase_answer(self, answer: Mapping[str, np.ndarray]) -> None:
        me, neighbours = self.ctx.node_id, set(self.ctx.comm.neighbors)
        self.cluster = int(answer["cluster"])
        self.inter_row = weight_row(answer, "inter", me, neighbours)
        self.intra_row = weight_row(answer, "intra", me, neighbours)
        if self.hyper.regimes == "global":
            self.intra_row = dict(self.inter_row)


def weight_row(answer: Mapping[str, Any], regime: str, me: int, neighbours: set[int]) -> Row:
    """A weight row of the coordinator's answer, checked: self plus neighbours, finite."""
    ids = [int(i) for i in np.asarray(answer[f"{regime}_ids"]).reshape(-1)]
    weights = [float(w) for w in np.asarray(answer[f"{regime}_w"]).reshape(-1)]
    if (len(ids) != len(weights) or me not in ids or ids != sorted(set(ids))
            or not set(ids) - {me} <= neighbours or not all(map(math.isfinite, weights))):
        raise ValueError(f"{regime} row must be sorted ids of self and neighbours with finite "
                         f"weights, got {ids}")
    return dict(zip(ids, weights, strict=True))


def steps_per_iteration(value: int | Literal["epoch"], samples: int, batch_size: int) -> int:
    """E: an int, or "epoch" = ceil(D_i / M) mini-batch steps (docs/protocols/ssd-fl.md#e1)."""
    return math.ceil(samples / batch_size) if value == "epoch" else value


def node_optimizer(ctx: NodeContext, hyper: CycleHyper) -> OptimizerConfig:
    """This device's optimizer: drawn from its own seeded stream as in Sec. VI-A (`random`),
    plain SGD everywhere (`sgd`, App. G-B) or its topology attribute (`topology`)."""
    if hyper.optimizers == "sgd":
        return OptimizerConfig()
    if hyper.optimizers == "topology":
        return OptimizerConfig.from_attrs(ctx.plan.node(ctx.node_id).attrs)
    return draw_optimizer(ctx.rng("optimizer"), hyper.prox_mu, hyper.momentum_rho)
