"""SSD-FL's four baselines under the paper's equal budget (Sec. VI;
docs/protocols/ssd-fl.md#baselines).

The paper's fairness rule: every method gets, per global cycle, tau_a training iterations plus
tau_r communication-only iterations. All four therefore run SSD-FL's engine (`ssdfl.py`: the
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
starting models.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from dfl_node.runner.context import NodeContext
from protocols.base import Protocol
from protocols.hyper import HyperConfig
from protocols.ssdfl.ssdfl import SSDFL, Row, check_optimizer_settings
from protocols.ssdfl.stc_sampling import EdgeSampler, mixing_row, random_partition, same_cluster


@dataclass(frozen=True)
class SyncConfig(HyperConfig):
    """The settings all baselines share with SSD-FL (its defaults file explains each)."""

    protocol_name: ClassVar[str] = "sdfl"
    lr: float = 0.01
    batch_size: int = 32
    tau_a: int = 3
    tau_r: int = 1
    local_steps: int | str = "epoch"
    optimizers: str = "random"
    prox_mu: list[float] = field(default_factory=lambda: [5e-5, 1e-4])
    momentum_rho: list[float] = field(default_factory=lambda: [0.8, 0.85])
    init_spread: float = 0.0

    def check(self) -> None:
        self.number("lr", 0.0, strict=True)
        self.count("batch_size")
        for name in ("tau_a", "tau_r"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                self.fail(name, "an integer >= 0")
        if self.tau_a + self.tau_r < 1:
            self.fail("tau_r", "at least 1 when tau_a is 0 (a cycle needs an iteration)")
        if self.local_steps != "epoch":
            self.count("local_steps")
        self.number("init_spread", 0.0, strict=False)
        try:
            check_optimizer_settings(vars(self))
        except ValueError as exc:
            raise ValueError(f"{self.protocol_name}: {exc}") from None


@dataclass(frozen=True)
class PeriodicConfig(SyncConfig):
    protocol_name: ClassVar[str] = "pdfl"


@dataclass(frozen=True)
class StochasticConfig(SyncConfig):
    protocol_name: ClassVar[str] = "stc"
    p_edge: float = 0.5

    def check(self) -> None:
        super().check()
        self.number("p_edge", 0.0, strict=True)
        if self.p_edge > 1:
            self.fail("p_edge", "a probability in (0, 1]")


@dataclass(frozen=True)
class ClusteredStochasticConfig(StochasticConfig):
    protocol_name: ClassVar[str] = "cstc"
    clusters_min: int = 2
    clusters_max: int | None = None  # None: floor(N/2)

    def check(self) -> None:
        super().check()
        self.count("clusters_min")
        if self.clusters_max is not None:
            self.count("clusters_max")
            if self.clusters_max < self.clusters_min:
                self.fail("clusters_max", f"at least clusters_min ({self.clusters_min})")


class SDFL(SSDFL):
    needs_prephase: ClassVar[bool] = False
    config_class: ClassVar[type[SyncConfig]] = SyncConfig

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.cfg = self.config_class.from_hyper(ctx.hyper)
        self.cluster = 0
        self.inter_row = ctx.plan.weight_row(ctx.node_id)
        self.intra_row = dict(self.inter_row)
        if self.cfg.init_spread > 0:
            spread_init(self.params, self.cfg.init_spread, ctx.torch_rng("init-spread"))

    @classmethod
    def check_hyper(cls, hyper: Mapping[str, Any]) -> None:
        Protocol.check_hyper(hyper)
        cls.config_class.from_hyper(hyper)


class PDFL(SDFL):
    config_class: ClassVar[type[SyncConfig]] = PeriodicConfig

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.intra_row = {ctx.node_id: 1.0}  # local training only, nothing sent


class STC(SDFL):
    config_class: ClassVar[type[SyncConfig]] = StochasticConfig
    cfg: StochasticConfig  # what config_class parses
    checkpoint_fields = (*SDFL.checkpoint_fields, "sampler")

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        plan = ctx.plan
        self.sampler = EdgeSampler(plan.seed, plan.ids, plan.edges(), float(self.cfg.p_edge))

    def intra_row_at(self, r: int, q: int) -> Row:
        return self.sampled_row(self.sampler.next_adjacency())

    def inter_row_at(self, r: int, q: int) -> Row:
        return self.sampled_row(self.sampler.next_adjacency())

    def sampled_row(self, adj: np.ndarray) -> Row:
        return mixing_row(adj, self.ctx.plan.mixing, self.ctx.plan.ids, self.ctx.node_id)


class CSTC(STC):
    config_class: ClassVar[type[SyncConfig]] = ClusteredStochasticConfig

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        plan, cfg = ctx.plan, self.cfg
        assert isinstance(cfg, ClusteredStochasticConfig)
        clusters = random_partition(plan.seed, plan.ids, cfg.clusters_min, cfg.clusters_max)
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
