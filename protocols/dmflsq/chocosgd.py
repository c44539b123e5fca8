"""CHOCO-SGD (Koloskova, Stich & Jaggi, ICML 2019), the DMFL-SQ paper's compressed baseline.

One round at node i (docs/protocols/choco-sgd.md):

    g_i        = grad f_i(x_i; B) + wd x_i
    x_i^{+1/2} = x_i - eta g_i
    q_i        = C(x_i^{+1/2} - x_hat_i)          C = Q8 o Top_{0.1}, sent every round
    x_hat_j   += q_j  for j in N_i and i itself
    x_i        = x_i^{+1/2} + gamma_c sum_{j in N_i} W_ij (x_hat_j - x_hat_i)

The public copies x_hat are the runtime's `PublicCopies`, shared with DMFL-SQ: the sender adds
exactly the tensors its neighbours decode, so every copy agrees bit for bit across processes.
They start at 0 as in the CHOCO paper (`copies_init: zero`) or at the shared x^0 (`model`), for
parity with DMFL-SQ. W is the plan's mixing matrix (Metropolis by default,
docs/protocols/dmfl-sq.md#a16).

With the identity compressor and gamma_c = 1 the round is x_i <- sum_j W_ij (x_j - eta g_j):
D-PSGD in the adapt-then-combine form the CHOCO paper writes (`d-psgd` with `form: atc`).

Formula bits: eq. (18) of the DMFL-SQ paper with chi = 1 on every link and round (no trigger):
k b_q + min(k ceil(log2 P), P) + b_scale + b_hdr, with b_q, b_scale from the compressor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from dfl_node.learning.flat import flatten, unflatten_into
from dfl_node.learning.training import BatchSampler, compute_gradients, grad_of
from dfl_node.runner.context import NodeContext
from dfl_node.wire.tags import Tag
from protocols.base import Protocol
from protocols.dmflsq.dmflsq import value_bits
from protocols.dmflsq.dmflsq_bits import Accounting, model_link_bits
from protocols.hyper import HyperConfig
from protocols.toolkit.compressors import SparseCompressor, build_compressor
from protocols.toolkit.copies import PublicCopies

PHASE = "choco"
COPIES_INIT = ("zero", "model")


@dataclass(frozen=True)
class ChocoConfig(HyperConfig):
    """`hyper:` of a choco-sgd run. Defaults are the DMFL-SQ paper's baseline settings."""

    protocol_name = "choco-sgd"
    lr: float = 0.018
    gamma: float = 0.25
    weight_decay: float = 5e-5
    batch_size: int = 32
    copies_init: str = "zero"
    compressor: dict[str, Any] = field(default_factory=lambda: {
        "sparsifier": {"type": "topk", "ratio": 0.1},
        "quantizer": {"type": "uniform", "bits": 8, "rounding": "nearest"}})
    accounting: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        self.number("lr", 0.0, strict=True)
        self.number("gamma", 0.0, strict=True)
        self.number("weight_decay", 0.0, strict=False)
        self.count("batch_size")
        self.choice("copies_init", COPIES_INIT)
        self.mapping("compressor")
        self.mapping("accounting")
        compressor = build_compressor(dict(self.compressor))
        Accounting.from_mapping(self.accounting, b_q=value_bits(compressor))


class ChocoSGD(Protocol):
    report_family = "dmfl-sq"  # compared in the DMFL-SQ paper's table
    checkpoint_fields = ("batches", "copies")

    @staticmethod
    def check_hyper(hyper: Mapping[str, Any]) -> None:
        ChocoConfig.from_hyper(hyper)

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.cfg = cfg = ChocoConfig.from_hyper(ctx.hyper)
        self.params = list(ctx.model.parameters())
        self.weights = ctx.plan.weight_row(ctx.node_id)
        compressor = build_compressor(dict(cfg.compressor))
        x0 = flatten(self.params)
        init = x0 if cfg.copies_init == "model" else torch.zeros_like(x0)
        self.copies = PublicCopies(compressor, ctx.plan.neighbors(ctx.node_id), init,
                                   ctx.torch_rng("compressor"))
        self.acc = Accounting.from_mapping(cfg.accounting, b_q=value_bits(compressor))
        self.sparse = isinstance(compressor, SparseCompressor)
        k_bound = (compressor.max_k(x0.numel()) if isinstance(compressor, SparseCompressor)
                   else x0.numel())
        largest = model_link_bits(True, k_bound, x0.numel(), self.acc, sparse=self.sparse,
                                  quantized=value_bits(compressor) < 32)
        self.message_bytes = -(-sum(largest.values()) // 8)
        self.batches = BatchSampler(ctx.data.x_train, ctx.data.y_train, cfg.batch_size,
                                    ctx.rng("batches"), ctx.device)
        ctx.comm.set_validator(PHASE, self.copies.validator())

    def run_round(self, r: int) -> dict[str, float]:
        ctx, cfg = self.ctx, self.cfg
        loss = compute_gradients(ctx.model, *self.batches.next())
        with torch.no_grad():
            x = flatten(self.params)
            g = flatten(grad_of(p) for p in self.params)
            if cfg.weight_decay:
                g.add_(x, alpha=cfg.weight_decay)
            x_half = x - cfg.lr * g
            q = self.copies.publish(self.copies.innovation(x_half))
        received = ctx.comm.exchange(Tag("data", r, PHASE), q.tensors)
        with torch.no_grad():
            self.copies.absorb(received)
            own = self.copies.own.to(x.device)
            pull = torch.zeros_like(x)
            for j, w_ij in self.weights.items():
                if j != ctx.node_id:
                    pull.add_(self.copies.of[j].to(x.device) - own, alpha=w_ij)
            unflatten_into(self.params, x_half + cfg.gamma * pull)
        link = model_link_bits(True, q.k, q.size, self.acc, sparse=q.position_coding != "dense",
                               quantized=q.quantized)
        for j in received:
            ctx.formula.charge_all(r, j, link)
        ctx.clock.sync_step(self.message_bytes, 1)
        return {"train_loss": loss, "k": float(q.k)}

    def extra_state(self) -> dict[str, torch.Tensor]:
        return self.copies.state("x_hat_self", "x_hat_from_")
