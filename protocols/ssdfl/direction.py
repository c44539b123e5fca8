"""SSD-FL's heterogeneous local optimizers at work: the direction of eq. 10 of the SSD-FL paper.

Every device i steps along the unified direction (eq. 10)

    g~_i^q = g_i^q + sum_{p<q} rho_i^{q-p} g_i^p + mu_i (theta_i^q - theta_i^{k,0}),

which is plain SGD (eq. 7) for mu = rho = 0, proximal SGD (eq. 8) for mu > 0 and heavy-ball
momentum (eq. 9) for rho > 0. The momentum sum is kept as the buffer m <- g + rho m (no
dampening), which reproduces eq. 9 exactly when m starts at 0; the sum and the proximal anchor
both run over the current intra-cluster regime only, so `reset` is called at every regime start
(docs/protocols/ssd-fl.md#a2, #a3). The proximal term is added outside the momentum
accumulation, as eq. 10 writes it.

Which optimizer a device runs (opt_i, mu_i, rho_i) is declared in optimizers.py, without torch,
because the launcher and the coordinator read it too; only a node steps, so only this imports
torch.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from protocols.ssdfl.optimizers import OptimizerConfig


class UnifiedDirection:
    """The eq. 10 direction per parameter tensor, with its momentum buffer and proximal anchor."""

    def __init__(self, spec: OptimizerConfig) -> None:
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
