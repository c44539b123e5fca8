"""D-PSGD (Lian et al., 2017): w_i <- sum_j W_ij w_j - eta * g_i(w_i).

Each round runs `local_steps - 1` plain local SGD steps, then the D-PSGD step: the gradient is
taken at the current local model while that model is exchanged with the neighbours, and the
mixed model minus the step is the new model. With `local_steps = 1` this is exactly
Theta <- W Theta - eta G; with `local_steps = 0` there is no gradient at all and each round is
one step of plain gossip averaging, Theta <- W Theta (the consensus part alone, which is what
bench/overhead.py times against the network's ideal). `form: atc` is the adapt-then-combine
variant that CHOCO-SGD's paper writes as D-PSGD, w_i <- sum_j W_ij (w_j - eta g_j): the
neighbours' models travel after their own step. The neighbour sum runs over j in sorted order
(self included), so its floating-point result does not depend on arrival order.

Formula bits (docs/protocols/dmfl-sq.md#a17): deg_i P 32 per round, one dense model per
neighbour; `accounting.b_hdr` adds a header per message (0 by default, as for q-FFL).

Losing a node (`--on-failure continue`): in the round a neighbour dies, its weight stays on this
node's own model when its message did not arrive (the row still sums to 1); from the round the
survivors agree on, the node mixes with the Metropolis weights of the surviving graph.

Robust aggregation (`hyper.aggregation`, docs/protocols/robust.md): the W-weighted sum is the
default rule, `mean`; a robust rule (median, trimmed mean, Krum, BRIDGE, ClippedGossip, ...)
takes its place through the SDK's `robust_mix`, and what it did joins the round's metrics.

Directed and time-varying topologies (docs/topologies.md#graph-schedules): the runtime sends
the model to the round's out-neighbours and gathers the in-neighbours', and W is round r's
(`plan.weight_row(i, r)`): Metropolis on an undirected round graph, 1/(1 + d_in) on self and
each in-neighbour on a directed one (the one-peer exponential graph's 1/2, Ying et al. 2021).
"""

from __future__ import annotations

import torch

from protocols.gossip.declarations import DPSGD_SPEC, DPSGDHyper
from protocols.sdk import (
    Exchange,
    LocalSGD,
    NodeContext,
    ProtocolNode,
    SurvivingGraph,
    dense,
    grad_of,
    robust_mix,
)


class DPSGD(ProtocolNode[DPSGDHyper]):
    spec = DPSGD_SPEC
    checkpoint_fields = ("sgd",)

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.weights = ctx.plan.weight_row(ctx.node_id) if ctx.plan.round_graphs is None else {}
        self.sgd = LocalSGD(ctx, self.hyper.batch_size)
        self.gossip = Exchange(ctx, "gossip", learner=self.sgd)

    def on_graph_change(self, graph: SurvivingGraph) -> None:
        self.weights = graph.metropolis_row(self.ctx.node_id)

    def run_round(self, r: int) -> dict[str, float]:
        loss = self.local_update()
        mine = {n: p.detach() for n, p in self.sgd.parameters().items()}
        theirs = self.gossip(r, dense(mine, self.hyper.accounting))
        plan = self.ctx.plan
        weights = self.weights if plan.round_graphs is None else plan.weight_row(
            self.ctx.node_id, r)
        info: dict[str, float] = {}  # what a robust rule did; the mean adds nothing
        mixed = robust_mix(self.hyper.aggregation, weights, self.ctx.node_id, mine, theirs, info)
        step = self.hyper.form == "cta" and loss is not None  # under atc it was taken before
        with torch.no_grad():
            for name, p in self.sgd.parameters().items():
                p.copy_(mixed[name] - self.hyper.lr * grad_of(p) if step else mixed[name])
        return info if loss is None else {"train_loss": loss, **info}

    def local_update(self) -> float | None:
        """The round's `local_steps - 1` SGD steps and the gradient of the D-PSGD step (taken,
        under `atc`); the last mini-batch's loss, or None with `local_steps = 0` (no training)."""
        if self.hyper.local_steps == 0:
            return None
        for _ in range(self.hyper.local_steps - 1):
            self.sgd.step(self.hyper.lr)
        if self.hyper.form == "atc":
            return self.sgd.step(self.hyper.lr)
        return self.sgd.gradient()
