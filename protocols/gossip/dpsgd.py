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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from dfl_node.learning.training import BatchSampler, compute_gradients, grad_of, sgd_step
from dfl_node.runner.context import NodeContext
from dfl_node.runner.membership import SurvivingGraph
from dfl_node.wire.tags import Tag
from protocols.base import Protocol, require_int, require_positive
from protocols.gossip.dense_bits import DenseAccounting, dense_link_bits

PHASE = "gossip"
FORMS = ("cta", "atc")  # combine-then-adapt (Lian et al.), adapt-then-combine


class DPSGD(Protocol):
    survives_failures = True
    report_family = "dmfl-sq"  # compared in the DMFL-SQ paper's table
    checkpoint_fields = ("batches",)

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.lr = float(ctx.hyper["lr"])
        self.local_steps = int(ctx.hyper.get("local_steps", 1))
        self.weights = ctx.plan.weight_row(ctx.node_id)
        self.params = dict(ctx.model.named_parameters())
        self.batches = BatchSampler(ctx.data.x_train, ctx.data.y_train,
                                    int(ctx.hyper["batch_size"]), ctx.rng("batches"), ctx.device)
        ctx.comm.set_schema(PHASE, {n: ("float32", tuple(p.shape))
                                    for n, p in self.params.items()})
        self.message_bytes = sum(p.numel() * p.element_size() for p in self.params.values())
        self.form = str(ctx.hyper.get("form", "cta"))
        size = sum(p.numel() for p in self.params.values())
        self.link_bits = dense_link_bits(1, size, DenseAccounting.from_mapping(
            ctx.hyper.get("accounting")))

    @staticmethod
    def check_hyper(hyper: Mapping[str, Any]) -> None:
        Protocol.check_hyper(hyper)
        require_positive(hyper, "lr")
        require_int(hyper, "batch_size", 32)
        require_int(hyper, "local_steps", 1, minimum=0)
        if hyper.get("form", "cta") not in FORMS:
            raise ValueError(f"form must be one of {list(FORMS)}, got {hyper.get('form')!r}")
        DenseAccounting.from_mapping(hyper.get("accounting"))

    def on_graph_change(self, graph: SurvivingGraph) -> None:
        self.weights = graph.metropolis_row(self.ctx.node_id)

    def run_round(self, r: int) -> dict[str, float]:
        loss = self.local_update()
        mine = {n: p.detach() for n, p in self.params.items()}
        theirs = self.ctx.comm.exchange(Tag("data", r, PHASE), mine)
        gossip_only = self.form == "atc" or loss is None  # the step was taken, or there is none
        with torch.no_grad():
            for name, p in self.params.items():
                mixed = torch.zeros_like(p)
                for j, w_ij in self.weights.items():
                    x = theirs[j][name].to(p.device) if j in theirs else mine[name]
                    mixed.add_(x, alpha=w_ij)
                p.copy_(mixed if gossip_only else mixed - self.lr * grad_of(p))
        for j in theirs:
            self.ctx.formula.charge_all(r, j, self.link_bits)
        self.ctx.clock.sync_step(self.message_bytes, self.local_steps)
        return {} if loss is None else {"train_loss": loss}

    def local_update(self) -> float | None:
        """The round's `local_steps - 1` SGD steps and the gradient of the D-PSGD step (taken,
        under `atc`); the last mini-batch's loss, or None with `local_steps = 0` (no training)."""
        if self.local_steps == 0:
            return None
        model = self.ctx.model
        for _ in range(self.local_steps - 1):
            compute_gradients(model, *self.batches.next())
            sgd_step(model, self.lr)
        loss = compute_gradients(model, *self.batches.next())
        if self.form == "atc":
            sgd_step(model, self.lr)
        return loss
