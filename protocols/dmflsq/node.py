"""DMFL-SQ (Tharakan & Fischione): fair, personalised DFL with sparse-quantised,
event-triggered exchange of model-copy innovations: the paper's Algorithm 1, mapped equation by
equation in docs/protocols/dmfl-sq.md.

One round t at client i (every client in lockstep):

  A  two independent mini-batches (streams "sel-batch", "grad-batch"); at the same pre-update
     parameters w_i^t: f_hat_i^t = mean loss on B_sel (eq. 9, no gradient) and g_i^t = mean
     gradient on B_grad (eq. 10).
  B  K_Psi synchronous max-consensus sub-rounds on (float32 f_hat, id), lexicographic, ties to
     the larger id (configurable); lambda_i = 1 iff the surviving id is i (Alg. 1 lines 8-9).
  C  r_i = alpha sum_{j in N_i} a_ij (w_i - w_hat_{j->i})   (eq. 15, sorted j, copies as they
     were before this round's messages); h_i = (1 + rho lambda_i) g_i + r_i (eq. 16);
     w_i <- w_i - gamma_t h_i (eq. 17).
  D  s_i = w_i^{t+1} - w_hat_i; if ||s_i|| >= theta_t, c_i = C(s_i) (C = Q8 o Top_k) goes to
     every neighbour and w_hat_i += c_i; otherwise nothing is sent on the data plane (the
     runtime's end-of-step marker tells the neighbours the step is over).
  E  w_hat_{j->i} += c_j for every c_j received; unchanged otherwise.

The common-copy property (sender's w_hat_i == every receiver's w_hat_{i->j}, bit for bit) holds
because the sender does not add its own float32 c: it decodes the exact tensors it puts on the
wire with the same `Compressor.decompress` the receivers call, and adds the result to a copy
that started from the same w^0 (every node builds w^0 from the run's shared init stream, so no
initial exchange is needed and none is charged: docs/protocols/dmfl-sq.md#a4).

Bits are charged to `ctx.formula` per directed link and round exactly as eqs. (18)-(19) count
them (`protocols/dmflsq/bits.py`), where the messages are sent: the model message states
its own bits (`Compressed.payload`), each consensus sub-round charges the pair it carried; the
wire ledger counts what the sockets carried beside it.

The code follows the paper's text directly: Algorithm 1 and eqs. (9)-(20), equation numbers in
the comments being the paper's. What the paper leaves open is resolved as the decisions of
docs/protocols/dmfl-sq.md say (cited as A<n>, e.g. docs/protocols/dmfl-sq.md#a3):
  - a_ij = 1 on every edge (`a_ij: unit`), or the topology's edge `weight` (`from_topology`);
    r_i sums over unordered edges, as eq. (15) writes it (A1, A2).
  - K_Psi = diam(G) from the plan unless `k_psi` is set (a warning in the node log if below).
  - tie rule: lexicographic max of (float32 loss, id), larger id wins (`tie_break`) (A5); the
    running maximum travels in each of exactly K_Psi sub-rounds (A6).
  - rho = 0 skips the consensus and charges nothing for it (`skip_consensus_when_rho0`, A14);
    alpha = 0 still triggers and sends.
  - gamma_t = lr constant (the experiments' "gamma = 0.1"); `lr_schedule: inv_sqrt_T` gives the
    theory's gamma / sqrt(T) (A3).
  - theta_t = theta0 / sqrt(t + 1), t from 0, non-strict >= on the float32 norm.
  - plain SGD, no momentum or weight decay (A22); f_hat under no_grad (no BN/dropout).
  - silence is signalled by the runtime's end-of-step control marker, never charged (b_trig = 0,
    A13); a message the receiver refuses (malformed) counts as silence and in rejected_messages.
  - a non-finite model stops the run with a named error rather than sending NaNs.

Losing a node (`--on-failure continue`): in the round a neighbour dies, what it did not send is
silence (its copy stays as it was, a consensus step goes on with the pairs that arrived); from
the round the survivors agree on, the coupling runs over the surviving edges only, the dead
neighbour's copy is dropped, and K_Psi is the surviving graph's diameter (unless `k_psi` is set).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F
from torch.nn.utils import parameters_to_vector

from protocols.dmflsq.bits import ceil_log2, psi_pair_bits
from protocols.dmflsq.declarations import DMFLSQ_SPEC, FORMULA_BITS, DMFLSQHyper
from protocols.sdk import (
    BatchSampler,
    ComputeStep,
    Exchange,
    LocalSGD,
    NodeContext,
    Payload,
    ProtocolNode,
    Received,
    SurvivingGraph,
    grad_of,
)
from protocols.toolkit.copies import PublicCopies
from protocols.toolkit.max_consensus import CONSENSUS_KIND, max_consensus
from protocols.toolkit.trigger import fires, silence, threshold

MODEL_PHASE = "dmflsq-model"
PSI_PHASE = "psi"


def coupling_weights(plan_edges: list[Any], node_id: int, mode: str) -> dict[int, float]:
    """a_ij for j in N_i, sorted by j: 1 (`unit`) or the edge's `weight` (`from_topology`)."""
    out: dict[int, float] = {}
    for edge in plan_edges:
        if isinstance(edge, Mapping):
            u, v, attrs = int(edge["u"]), int(edge["v"]), edge
        else:
            u, v, attrs = int(edge[0]), int(edge[1]), {}
        if node_id not in (u, v):
            continue
        j = v if u == node_id else u
        weight = float(attrs.get("weight", 1.0)) if mode == "from_topology" else 1.0
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"dmfl-sq: edge {u}-{v} weight must be >= 0, got {weight}")
        out[j] = weight
    return dict(sorted(out.items()))


class DMFLSQ(ProtocolNode[DMFLSQHyper]):
    """One client of DMFL-SQ. State: w_i (the model's parameters), w_hat_i (the copy every
    neighbour holds of w_i) and w_hat_{j->i} per neighbour j: (2 + deg_i) P float32."""

    spec = DMFLSQ_SPEC
    checkpoint_fields = ("sel_batches", "sgd", "copies", "rounds_run", "triggers", "k_sum",
                         "bits_sent", "selected")

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        hyper = self.hyper
        plan, me = ctx.plan, ctx.node_id
        self.n = len(plan.ids)
        self.neighbors = plan.neighbors(me)
        self.a = coupling_weights(plan.topology["edges"], me, hyper.a_ij)
        self.params = list(ctx.model.parameters())
        with torch.no_grad():
            w0 = parameters_to_vector(self.params).detach().to(torch.float32).clone()
        self.size = int(w0.numel())
        compressor = hyper.compressor.build()
        # Alg. 1 line 3: w_hat_i^0 = w_i^0 and w_hat_{j->i}^0 = w_j^0 = w^0 (shared init).
        self.copies = PublicCopies(compressor, self.neighbors, w0, ctx.torch_rng("compressor"))
        # The virtual clock's model step: the largest message C can produce, as eq. (18) counts
        # it (the wire never exceeds that, up to byte rounding).
        self.model_bytes = -(-compressor.largest_bits(self.size, hyper.accounting) // 8)

        self.consensus = not (hyper.rho == 0 and hyper.skip_consensus_when_rho0)
        self.pair_bits = {"psi": psi_pair_bits(self.n, hyper.accounting)}
        self.use_diameter(plan.diameter())
        self.psi_bytes = -(-(hyper.accounting.b_loss + ceil_log2(self.n)) // 8)

        self.sel_batches = BatchSampler(ctx.data.x_train, ctx.data.y_train, hyper.batch_sel,
                                        ctx.rng("sel-batch"), ctx.device)
        self.sgd = LocalSGD(ctx, hyper.batch_grad, stream="grad-batch")
        # Virtual time: one compute step, K_Psi tiny consensus steps, one model step costed at
        # the largest message the compressor can produce (the same at every node).
        self.compute = ComputeStep(ctx, self.sgd)
        self.psi = Exchange(ctx, PSI_PHASE, kind=CONSENSUS_KIND, clock_bytes=self.psi_bytes)
        self.innovations = Exchange(ctx, MODEL_PHASE, validator=self.copies.validator(),
                                    clock_bytes=self.model_bytes,
                                    silence=silence(hyper.accounting))

        self.rounds_run = 0
        self.triggers = 0
        self.k_sum = 0
        self.bits_sent = 0
        self.selected = Counter[int]()

    def use_diameter(self, diam: int) -> None:
        """K_Psi = diam(G) unless `k_psi` is set (a warning if that is below the diameter)."""
        k_psi = self.hyper.k_psi
        self.k_psi = k_psi if isinstance(k_psi, int) else diam
        if self.k_psi < diam:
            self.ctx.log.warning("dmfl-sq: k_psi = %d < diam(G) = %d: clients may disagree on "
                                 "the selected client", self.k_psi, diam)

    def on_graph_change(self, graph: SurvivingGraph) -> None:
        self.neighbors = graph.neighbors(self.ctx.node_id)
        self.a = {j: a_ij for j, a_ij in self.a.items() if j in self.neighbors}
        for j in [j for j in self.copies.of if j not in self.neighbors]:
            del self.copies.of[j]
        self.use_diameter(graph.diameter())

    def lr_at(self, r: int) -> float:
        if self.hyper.lr_schedule == "inv_sqrt_T":
            return self.hyper.lr / math.sqrt(self.ctx.plan.rounds)
        return self.hyper.lr

    def run_round(self, r: int) -> dict[str, float]:
        ctx, hyper, me = self.ctx, self.hyper, self.ctx.node_id
        model = ctx.model
        # Phase A: both mini-batches at the same pre-update parameters w_i^t.
        x_sel, y_sel = self.sel_batches.next()
        with torch.no_grad():
            f_hat = np.float32(F.cross_entropy(model(x_sel), y_sel).to(torch.float32).item())
        train_loss = self.sgd.gradient()
        with torch.no_grad():
            w = parameters_to_vector(self.params).to(torch.float32)
            g = parameters_to_vector([grad_of(p) for p in self.params]).to(torch.float32)
        self.compute()

        # Phase B: fairness selection by scalar max-consensus on (f_hat, id).
        psi_bits = 0
        if self.consensus:
            def sub_round(k: int, pair: Payload) -> dict[int, Received]:
                return self.psi(r, pair, step=k)

            _, winner = max_consensus(sub_round, me, f_hat, self.k_psi,
                                      pair_bits=self.pair_bits, tie_break=hyper.tie_break)
            winner = int(winner)
            self.selected[winner] += 1
            psi_bits = self.k_psi * sum(self.pair_bits.values()) * len(self.neighbors)
        else:
            winner = -1
        lam = 1.0 if winner == me else 0.0

        # Phase C: coupling from the copies as they were before this round's messages.
        gamma = self.lr_at(r)
        with torch.no_grad():
            coupling = torch.zeros_like(w)
            for j, a_ij in self.a.items():
                coupling.add_(w - self.copies.of[j].to(w.device), alpha=a_ij)
            h = g * (1.0 + hyper.rho * lam) + coupling * hyper.alpha
            w_new = w - gamma * h
            offset = 0
            for p in self.params:
                p.copy_(w_new[offset:offset + p.numel()].view_as(p))
                offset += p.numel()

            # Phase D: event-triggered compressed broadcast of the innovation.
            s = self.copies.innovation(w_new)
            s_norm = float(torch.linalg.vector_norm(s))
            if not math.isfinite(s_norm):
                raise FloatingPointError(f"dmfl-sq: client {me} diverged at round {r} "
                                         f"(non-finite model); lower lr (now {gamma})")
            theta = threshold(hyper.trigger, hyper.theta0, r)
            fired = bool(fires(s_norm, theta))
            k = 0
            payload = None
            if fired:
                compressed = self.copies.publish(s)
                k = compressed.k
                payload = compressed.payload(hyper.accounting)

        # Charged on every link what it states, eq. (18)'s bracket, or b_trig alone when silent.
        received = self.innovations.optional(r, payload)

        # Phase E: neighbour copies.
        with torch.no_grad():
            self.copies.absorb(received)
            residual = float(torch.linalg.vector_norm(self.copies.innovation(w_new))) ** 2
        link_bits = payload.total_bits if payload is not None else sum(
            self.innovations.silence.values())
        model_bits = link_bits * len(self.neighbors)

        self.rounds_run += 1
        self.triggers += int(fired)
        self.k_sum += k
        self.bits_sent += psi_bits + model_bits
        return {
            "train_loss": train_loss,
            "f_hat": float(f_hat),
            "selected": float(winner),
            "triggered": float(fired),
            "k": float(k),
            "s_norm": s_norm,
            "theta": float(theta),
            "psi_bits": float(psi_bits),
            "model_bits": float(model_bits),
            FORMULA_BITS: float(self.bits_sent),
            "comm_residual": sum(self.a.values()) * residual,
        }

    def summary(self) -> dict[str, float | dict[str, float]]:
        """trigger_rate: fraction of rounds this client sent; mean_k: mean k_i^t over the rounds
        it sent (absent if it never did, so the launcher's mean is over senders);
        selected_histogram: how often each client was i_t* in this client's view (identical at
        every client when K_Psi >= diam, so the launcher's mean is that common count)."""
        out: dict[str, float | dict[str, float]] = {
            "trigger_rate": self.triggers / max(self.rounds_run, 1),
            "selected_histogram": {str(i): float(c) for i, c in sorted(self.selected.items())},
        }
        if self.triggers:
            out["mean_k"] = self.k_sum / self.triggers
        return out

    def extra_state(self) -> dict[str, torch.Tensor]:
        return self.copies.state("w_hat_self", "w_hat_from_")
