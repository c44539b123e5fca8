"""SSD-FL's clustering settings (the `clustering:` section of its hyper-parameters) and Algorithm
1's inputs for one run, apart from the algorithm (clustering.py, heterogeneity.py): the launcher
reads every protocol's settings to check a request, or to list the protocols when one is
unknown, and these need none of the algorithm's numpy (issue 45).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from dfl_config.section import (
    Count,
    Flag,
    Integer,
    NonNegativeInt,
    Number,
    Positive,
    Section,
)


class HeterogeneityConfig(Section):
    """The constants of eqs. 38-41, the paper's (Sec. VI) by default; `clustering:` in the
    hyper-parameters holds them beside Algorithm 1's settings."""

    zeta: tuple[Number, Number, Number] = (1.0, 1.0, 1.0)
    """zeta_1..3 of eqs. 38-39: the weights of type, mu and rho differences."""
    alpha_o: tuple[Number, Number] = (0.0, 0.2)
    """(alpha^{o,min}, alpha^{o,max}) of eq. 39."""
    alpha_d: tuple[Number, Number] = (0.0, 0.2)
    """(alpha^{d,min}, alpha^{d,max}) of eq. 41."""


class ClusteringSettings(HeterogeneityConfig):
    """The `clustering:` section of SSD-FL's hyper-parameters: Algorithm 1's constants, the
    paper's (Sec. VI) or the decisions of docs/protocols/ssd-fl.md, and the overrides."""

    eta: Positive | None = None
    """The eta of eq. 37 and H; null: the training rate `lr` (docs/protocols/ssd-fl.md#c6)."""
    B: Positive = 1.0
    """Gradient bound (docs/protocols/ssd-fl.md#c6)."""
    gamma: Number = 1.0
    """Smoothness gamma_i (docs/protocols/ssd-fl.md#c6)."""
    delta_tol: Positive = 10.0
    """||Delta^tol||, every S (Sec. VI)."""
    alpha: Number = 0.1
    """Baseline variance (Sec. VI)."""
    conductance: Literal["auto", "exact", "sweep"] = "auto"
    """exact enumeration up to `exact_max` members and the Fiedler sweep beyond (auto), or one
    of them always (docs/protocols/ssd-fl.md#c2)."""
    exact_max: Annotated[Integer, Field(ge=2)] = 14
    """The largest cluster whose conductance `auto` enumerates exactly."""
    conductance_weights: Literal["mixing", "unweighted"] = "mixing"
    """The cluster's own MH matrix, or its 0/1 adjacency (docs/protocols/ssd-fl.md#c1)."""
    singleton_conductance: Number = 0.0
    """A one-device cluster's conductance (docs/protocols/ssd-fl.md#c3)."""
    min_cluster_size: Count = 2
    """Smaller clusters make a candidate infeasible (docs/protocols/ssd-fl.md#c9)."""
    h_numerator: Literal["sum", "mean"] = "sum"
    """L~_s: the sum of the members' losses (eq. 15a), or their mean."""
    threshold_include_tau_a: Flag = False
    """Keep tau_a in eq. 35's threshold (docs/protocols/ssd-fl.md#c8)."""
    override_S: Count | None = None
    """Force S* (the candidate with S clusters)."""
    override_partition: tuple[Annotated[tuple[NonNegativeInt, ...], Field(min_length=1)],
                              ...] | None = None
    """Force the clusters, e.g. [[0, 1, 2], [3, 4]] (node ids)."""


class ClusteringConfig(ClusteringSettings):
    """Algorithm 1's inputs for one run: the settings with eta resolved, the run's tau_a and
    mixing, and `override_partition` by node index (0..N-1) rather than id."""

    eta: Positive
    tau_a: Count
    lazy_mixing: Flag = False
    """A~_s is lazy Metropolis-Hastings, (I + W) / 2 (docs/protocols/ssd-fl.md#a4)."""

    @classmethod
    def resolve(cls, settings: ClusteringSettings, lr: float, tau_a: int,
                lazy_mixing: bool = False) -> ClusteringConfig:
        """`settings` for a run whose training rate is `lr` (`eta: null`)."""
        eta = lr if settings.eta is None else settings.eta
        return cls.model_validate({**settings.model_dump(), "eta": eta, "tau_a": tau_a,
                                   "lazy_mixing": lazy_mixing})
