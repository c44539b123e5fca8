"""SSD-FL's heterogeneous local optimizers: eqs. 7-10 of the SSD-FL paper.

Every device i steps along the unified direction (eq. 10)

    g~_i^q = g_i^q + sum_{p<q} rho_i^{q-p} g_i^p + mu_i (theta_i^q - theta_i^{k,0}),

which is plain SGD (eq. 7) for mu = rho = 0, proximal SGD (eq. 8) for mu > 0 and heavy-ball
momentum (eq. 9) for rho > 0. The momentum sum is kept as the buffer m <- g + rho m (no
dampening), which reproduces eq. 9 exactly when m starts at 0; the sum and the proximal anchor
both run over the current intra-cluster regime only, so `reset` is called at every regime start
(docs/protocols/ssd-fl.md#a2, #a3). The proximal term is added outside the momentum
accumulation, as eq. 10 writes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

KINDS = ("sgd", "prox", "momentum")
ASSIGNMENTS = ("random", "sgd", "topology")
PAPER_MU = (5e-5, 1e-4)  # Sec. VI-A: proximal devices draw mu uniformly from these
PAPER_RHO = (0.8, 0.85)  # Sec. VI-A: momentum devices draw rho uniformly from these


@dataclass(frozen=True)
class OptimizerSpec:
    """One device's optimizer (opt_i, mu_i, rho_i); mu = 0 unless prox, rho = 0 unless momentum."""

    kind: str = "sgd"
    mu: float = 0.0
    rho: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"optimizer type must be one of {KINDS}, got {self.kind!r}")
        for name in ("mu", "rho"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"optimizer {name} must be in [0, 1), got {value!r}")
        if (self.kind != "prox" and self.mu) or (self.kind != "momentum" and self.rho):
            raise ValueError(f"optimizer {self.kind}: mu is for prox and rho for momentum only")

    @property
    def code(self) -> int:
        return KINDS.index(self.kind)

    def to_array(self) -> np.ndarray:
        """The pre-phase descriptor: (type code, mu, rho) as float64."""
        return np.array([self.code, self.mu, self.rho], dtype=np.float64)

    @classmethod
    def from_array(cls, values: np.ndarray) -> OptimizerSpec:
        code, mu, rho = (float(v) for v in values)
        if code not in range(len(KINDS)):
            raise ValueError(f"optimizer code must be 0..{len(KINDS) - 1}, got {code!r}")
        return cls(KINDS[int(code)], mu, rho)

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any]) -> OptimizerSpec:
        """A topology node's `optimizer: {type, mu, rho}` attribute; plain SGD when absent."""
        raw = attrs.get("optimizer", {"type": "sgd"})
        if isinstance(raw, str):
            raw = {"type": raw}
        if not isinstance(raw, Mapping) or set(raw) - {"type", "mu", "rho"}:
            raise ValueError(f"node attribute optimizer must be {{type, mu, rho}}, got {raw!r}")
        return cls(str(raw.get("type", "sgd")), float(raw.get("mu", 0.0)),
                   float(raw.get("rho", 0.0)))


def draw_optimizer(rng: np.random.Generator, mus: Sequence[float] = PAPER_MU,
                   rhos: Sequence[float] = PAPER_RHO) -> OptimizerSpec:
    """The paper's random assignment: type uniform over the three, then mu or rho uniform."""
    kind = KINDS[int(rng.integers(len(KINDS)))]
    if kind == "prox":
        return OptimizerSpec(kind, mu=float(mus[int(rng.integers(len(mus)))]))
    if kind == "momentum":
        return OptimizerSpec(kind, rho=float(rhos[int(rng.integers(len(rhos)))]))
    return OptimizerSpec(kind)


class UnifiedDirection:
    """The eq. 10 direction per parameter tensor, with its momentum buffer and proximal anchor."""

    def __init__(self, spec: OptimizerSpec) -> None:
        self.spec = spec
        self._momentum: dict[str, torch.Tensor] = {}
        self._anchor: dict[str, torch.Tensor] = {}

    def reset(self, params: Mapping[str, torch.Tensor]) -> None:
        """Start of an intra-cluster regime: anchor at the current model, momentum sum empty."""
        self._anchor = ({n: p.detach().clone() for n, p in params.items()}
                        if self.spec.mu else {})
        self._momentum = {}

    @torch.no_grad()
    def direction(self, name: str, grad: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """g~ at `theta` given the mini-batch gradient `grad` there (eq. 10)."""
        d = grad.clone()
        if self.spec.rho:
            if name in self._momentum:
                d.add_(self._momentum[name], alpha=self.spec.rho)
            self._momentum[name] = d.clone()
        if self.spec.mu:
            d.add_(theta - self._anchor[name], alpha=self.spec.mu)
        return d
