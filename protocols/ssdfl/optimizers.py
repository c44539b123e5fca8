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
from typing import Annotated, Any, Literal, get_args

import numpy as np
import torch
from pydantic import (
    AfterValidator,
    BeforeValidator,
    GetJsonSchemaHandler,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from dfl_config.section import NonNegative, Section

Kind = Literal["sgd", "prox", "momentum"]
KINDS: tuple[Kind, ...] = get_args(Kind)  # the pre-phase's type codes, in this order


def _below_one(value: float) -> float:
    if value >= 1:
        raise ValueError("must be < 1")
    return value


Fraction = Annotated[NonNegative, AfterValidator(_below_one)]
"""A number in [0, 1), the range the paper draws mu and rho from."""


class OptimizerSpec(Section):
    """One device's optimizer (opt_i, mu_i, rho_i) of eq. 10; the topology attribute
    `optimizer: {type, mu, rho}` (or just the type) is this model."""

    type: Kind = "sgd"
    """sgd (eq. 7), prox (eq. 8) or momentum (eq. 9)."""
    mu: Fraction = 0.0
    """The proximal weight; prox only."""
    rho: Fraction = 0.0
    """The momentum factor; momentum only."""

    @model_validator(mode="after")
    def _own_constants(self) -> OptimizerSpec:
        if (self.type != "prox" and self.mu) or (self.type != "momentum" and self.rho):
            raise ValueError(f"{self.type}: mu is for prox and rho for momentum only")
        return self

    @property
    def code(self) -> int:
        return KINDS.index(self.type)

    def to_array(self) -> np.ndarray:
        """The pre-phase descriptor: (type code, mu, rho) as float64."""
        return np.array([self.code, self.mu, self.rho], dtype=np.float64)

    @classmethod
    def from_array(cls, values: np.ndarray) -> OptimizerSpec:
        code, mu, rho = (float(v) for v in values)
        if code not in range(len(KINDS)):
            raise ValueError(f"optimizer code must be 0..{len(KINDS) - 1}, got {code!r}")
        return cls(type=KINDS[int(code)], mu=mu, rho=rho)

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any]) -> OptimizerSpec:
        """A topology node's `optimizer` attribute; plain SGD when absent."""
        node = SSDFLNodeAttributes.model_validate({"optimizer": attrs.get("optimizer")})
        return node.optimizer or cls()


def _type_alone(value: Any) -> Any:
    """`optimizer: prox` is short for `optimizer: {type: prox}`."""
    return {"type": value} if isinstance(value, str) else value


class _TypeOrMapping:
    """The JSON Schema of the attribute: a type name or an `OptimizerSpec` mapping."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {"anyOf": [{"enum": list(KINDS)}, handler(core_schema)]}


class SSDFLNodeAttributes(Section):
    """The topology node attributes the SSD-FL family reads (with `optimizers: topology`)."""

    optimizer: Annotated[OptimizerSpec, BeforeValidator(_type_alone), _TypeOrMapping] | None = None
    """The device's optimizer: `sgd`, `{type: prox, mu: 0.3}` or `{type: momentum, rho: 0.9}`;
    plain SGD when absent."""


def draw_optimizer(rng: np.random.Generator, mus: Sequence[float],
                   rhos: Sequence[float]) -> OptimizerSpec:
    """The paper's random assignment (Sec. VI-A): type uniform over the three, then mu or rho
    uniform over `mus` or `rhos`."""
    kind = KINDS[int(rng.integers(len(KINDS)))]
    if kind == "prox":
        return OptimizerSpec(type=kind, mu=float(mus[int(rng.integers(len(mus)))]))
    if kind == "momentum":
        return OptimizerSpec(type=kind, rho=float(rhos[int(rng.integers(len(rhos)))]))
    return OptimizerSpec(type=kind)


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
