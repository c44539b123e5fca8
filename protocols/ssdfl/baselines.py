"""SSD-FL's four baselines under the paper's equal budget (Sec. VI;
docs/protocols/ssd-fl.md#baselines).

The paper's fairness rule: every method gets, per global cycle, tau_a training iterations plus
tau_r communication-only iterations. All four therefore run SSD-FL's engine (`node.py`: the
same eq. 11 iteration, the same eq. 10 per-device optimizers with their momentum/anchor reset at
the start of each cycle's training phase (docs/protocols/ssd-fl.md#a2, #a3), the same shared
init, batch streams and
optimizer draw per seed (docs/protocols/ssd-fl.md#e9)) and differ only in the weight row of
each iteration:

  sdfl  synchronous DFL (ref. [21]): the global matrix A in every iteration, i.e. eq. 11 with A
        in place of A~, then eq. 18 tau_r times. Equal to SSD-FL with S = 1, bit for bit.
  pdfl  periodic DFL / decentralized FedAvg (ref. [32]): tau_a iterations of local training with
        no communication (row = {i: 1}), then tau_r gossip steps with A. tau_a = 0 is pure
        gossip, Theta <- A^T Theta per step.
  stc   stochastic DFL (ref. [15]): sDFL's schedule, but every iteration mixes with W^(t):
        Metropolis-Hastings on a sampled subgraph that keeps each edge with p_edge
        (`stc_sampling.py`; both ends of an edge agree on it without a message).
  cstc  clustered STC: random S and random membership (`stc_sampling.random_partition`); STC
        restricted to in-cluster edges in the intra regime, STC over G in the inter regime.

None needs SSD-FL's pre-phase: their rows come from the plan (sdfl, pdfl) or from shared
streams (stc, cstc). `init_spread` > 0 adds per-device Gaussian noise to the shared init, which
the paper never does; it exists so that consensus (pure gossip) can be measured from distinct
starting models. Their settings are declared in `declarations.py`, without torch.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from protocols.sdk import NodeContext
from protocols.ssdfl.declarations import (
    CSTC_SPEC,
    PDFL_SPEC,
    SDFL_SPEC,
    STC_SPEC,
    CSTCHyper,
    SDFLHyper,
    STCHyper,
)
from protocols.ssdfl.node import CycleEngine, Row
from protocols.ssdfl.stc_sampling import EdgeSampler, mixing_row, random_partition, same_cluster


class SDFL(CycleEngine[SDFLHyper]):
    spec = SDFL_SPEC

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.cluster = 0
        self.inter_row = ctx.plan.weight_row(ctx.node_id)
        self.intra_row = dict(self.inter_row)
        if self.hyper.init_spread > 0:
            spread_init(self.params, self.hyper.init_spread, ctx.torch_rng("init-spread"))


class PDFL(SDFL):
    spec = PDFL_SPEC

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.intra_row = {ctx.node_id: 1.0}  # local training only, nothing sent


class STC(SDFL):
    spec = STC_SPEC
    hyper: STCHyper
    checkpoint_fields = (*SDFL.checkpoint_fields, "sampler")

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        plan = ctx.plan
        self.sampler = EdgeSampler(plan.seed, plan.ids, plan.edges(), self.hyper.p_edge)

    def intra_row_at(self, r: int, q: int) -> Row:
        return self.sampled_row(self.sampler.next_adjacency())

    def inter_row_at(self, r: int, q: int) -> Row:
        return self.sampled_row(self.sampler.next_adjacency())

    def sampled_row(self, adj: np.ndarray) -> Row:
        return mixing_row(adj, self.ctx.plan.mixing, self.ctx.plan.ids, self.ctx.node_id)


class CSTC(STC):
    spec = CSTC_SPEC
    hyper: CSTCHyper

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        plan = ctx.plan
        clusters = random_partition(plan.seed, plan.ids, self.hyper.clusters_min,
                                    self.hyper.clusters_max)
        self.cluster = next(c for c, m in enumerate(clusters) if ctx.node_id in m)
        self.in_cluster = same_cluster(plan.ids, clusters)

    def intra_row_at(self, r: int, q: int) -> Row:
        return self.sampled_row(self.sampler.next_adjacency() * self.in_cluster)


def spread_init(params: Mapping[str, torch.Tensor], std: float, gen: torch.Generator) -> None:
    """theta_i^0 <- theta^0 + N(0, std^2) per coordinate, in parameter order, from the device's
    own stream."""
    with torch.no_grad():
        for p in params.values():
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype).to(p.device), alpha=std)
