"""SSD-FL's heterogeneous local optimizers (eqs. 7-10 of the SSD-FL paper): which one each
device runs, (opt_i, mu_i, rho_i): plain SGD (eq. 7), proximal SGD (eq. 8, mu > 0) or heavy-ball
momentum (eq. 9, rho > 0).

Declared here without torch because the launcher reads it (the topology's `optimizer` node
attribute, validated before any node starts) and so does the one-time coordinator (each
device's pre-phase report, the heterogeneity score). The direction a device steps along, eq. 10,
is direction.py's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import (
    BeforeValidator,
    GetJsonSchemaHandler,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from dfl_config.section import Fraction, Section

if TYPE_CHECKING:  # numpy where a descriptor is made: the launcher reads this model without it
    import numpy as np

Kind = Literal["sgd", "prox", "momentum"]
KINDS: tuple[Kind, ...] = get_args(Kind)  # the pre-phase's type codes, in this order




class OptimizerConfig(Section):
    """One device's optimizer (opt_i, mu_i, rho_i) of eq. 10; the topology attribute
    `optimizer: {type, mu, rho}` (or just the type) is this model."""

    type: Kind = "sgd"
    """sgd (eq. 7), prox (eq. 8) or momentum (eq. 9)."""
    mu: Fraction = 0.0
    """The proximal weight; prox only."""
    rho: Fraction = 0.0
    """The momentum factor; momentum only."""

    @model_validator(mode="after")
    def _own_constants(self) -> OptimizerConfig:
        if (self.type != "prox" and self.mu) or (self.type != "momentum" and self.rho):
            raise ValueError(f"{self.type}: mu is for prox and rho for momentum only")
        return self

    @property
    def code(self) -> int:
        return KINDS.index(self.type)

    def to_array(self) -> np.ndarray:
        """The pre-phase descriptor: (type code, mu, rho) as float64."""
        import numpy as np

        return np.array([self.code, self.mu, self.rho], dtype=np.float64)

    @classmethod
    def from_array(cls, values: np.ndarray) -> OptimizerConfig:
        code, mu, rho = (float(v) for v in values)
        if code not in range(len(KINDS)):
            raise ValueError(f"optimizer code must be 0..{len(KINDS) - 1}, got {code!r}")
        return cls(type=KINDS[int(code)], mu=mu, rho=rho)

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any]) -> OptimizerConfig:
        """A topology node's `optimizer` attribute; plain SGD when absent."""
        node = SSDFLNodeAttributes.model_validate({"optimizer": attrs.get("optimizer")})
        return node.optimizer or cls()


def _type_alone(value: Any) -> Any:
    """`optimizer: prox` is short for `optimizer: {type: prox}`."""
    return {"type": value} if isinstance(value, str) else value


class _TypeOrMapping:
    """The JSON Schema of the attribute: a type name or an `OptimizerConfig` mapping."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {"anyOf": [{"enum": list(KINDS)}, handler(core_schema)]}


class SSDFLNodeAttributes(Section):
    """The topology node attributes the SSD-FL family reads (with `optimizers: topology`)."""

    optimizer: (Annotated[OptimizerConfig, BeforeValidator(_type_alone), _TypeOrMapping]
                | None) = None
    """The device's optimizer: `sgd`, `{type: prox, mu: 0.3}` or `{type: momentum, rho: 0.9}`;
    plain SGD when absent."""


def draw_optimizer(rng: np.random.Generator, mus: Sequence[float],
                   rhos: Sequence[float]) -> OptimizerConfig:
    """The paper's random assignment (Sec. VI-A): type uniform over the three, then mu or rho
    uniform over `mus` or `rhos`."""
    kind = KINDS[int(rng.integers(len(KINDS)))]
    if kind == "prox":
        return OptimizerConfig(type=kind, mu=float(mus[int(rng.integers(len(mus)))]))
    if kind == "momentum":
        return OptimizerConfig(type=kind, rho=float(rhos[int(rng.integers(len(rhos)))]))
    return OptimizerConfig(type=kind)

