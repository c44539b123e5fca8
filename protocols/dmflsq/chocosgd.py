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
k b_q + min(k ceil(log2 P), P) + b_scale + b_hdr, with b_q, b_scale from the compressor, as
the compressed message states them (`Compressed.payload`).
"""

from __future__ import annotations

import torch

from protocols.dmflsq.declarations import CHOCO_SPEC, ChocoHyper
from protocols.sdk import (
    Exchange,
    LocalSGD,
    NodeContext,
    ProtocolNode,
    flatten,
    grad_of,
    unflatten_into,
)
from protocols.toolkit.copies import PublicCopies


class ChocoSGD(ProtocolNode[ChocoHyper]):
    spec = CHOCO_SPEC
    checkpoint_fields = ("sgd", "copies")

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.params = list(ctx.model.parameters())
        self.weights = ctx.plan.weight_row(ctx.node_id)
        compressor = self.hyper.compressor.build()
        x0 = flatten(self.params)
        init = x0 if self.hyper.copies_init == "model" else torch.zeros_like(x0)
        self.copies = PublicCopies(compressor, ctx.plan.neighbors(ctx.node_id), init,
                                   ctx.torch_rng("compressor"))
        self.sgd = LocalSGD(ctx, self.hyper.batch_size)
        # The clock times every message at the largest one C can produce.
        largest = compressor.largest_bits(x0.numel(), self.hyper.accounting)
        self.gossip = Exchange(ctx, "choco", learner=self.sgd, validator=self.copies.validator(),
                               clock_bytes=-(-largest // 8))

    def run_round(self, r: int) -> dict[str, float]:
        hyper = self.hyper
        loss = self.sgd.gradient()
        with torch.no_grad():
            x = flatten(self.params)
            g = flatten(grad_of(p) for p in self.params)
            if hyper.weight_decay:
                g.add_(x, alpha=hyper.weight_decay)
            x_half = x - hyper.lr * g
            q = self.copies.publish(self.copies.innovation(x_half))
        received = self.gossip(r, q.payload(hyper.accounting))
        with torch.no_grad():
            self.copies.absorb(received)
            own = self.copies.own.to(x.device)
            pull = torch.zeros_like(x)
            for j, w_ij in self.weights.items():
                if j != self.ctx.node_id:
                    pull.add_(self.copies.of[j].to(x.device) - own, alpha=w_ij)
            unflatten_into(self.params, x_half + hyper.gamma * pull)
        return {"train_loss": loss, "k": float(q.k)}

    def extra_state(self) -> dict[str, torch.Tensor]:
        return self.copies.state("x_hat_self", "x_hat_from_")
