"""What the launcher knows of the SSD-FL family (SSD-FL, SDFL, PDFL, STC, CSTC): their settings,
capabilities and checks (protocols/declaration.py), and SSD-FL's one-time coordinator, which runs in
the coordinator process. The algorithms are the node classes of node.py (SSD-FL and the cycle
they all run) and baselines.py; nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from dfl_config.section import Count, Fraction, NonNegative, NonNegativeInt, Positive
from protocols.capabilities import PrePhase
from protocols.declaration import ProtocolDeclaration, model_fits_data
from protocols.hyper import TrainingHyper
from protocols.sdk import Coordination, RunPlan
from protocols.ssdfl import report_table
from protocols.ssdfl.clustering_settings import ClusteringConfig, ClusteringSettings
from protocols.ssdfl.optimizers import SSDFLNodeAttributes

if TYPE_CHECKING:
    import numpy as np


def _epoch_or_count(value: Any) -> Any:
    if value == "epoch" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError(f"must be 'epoch' or an integer >= 1, got {value!r}")


LocalSteps = Annotated[Literal["epoch"] | Count, BeforeValidator(_epoch_or_count)]
Draws = Annotated[tuple[Fraction, ...], Field(min_length=1)]


class CycleHyper(TrainingHyper):
    """The settings of SSD-FL's global cycle, which its baselines run too: the paper's
    (Sec. VI) where it gives them, the decisions of docs/protocols/ssd-fl.md where it does not."""

    lr: Positive = 0.01
    """eta of eq. 11 (docs/protocols/ssd-fl.md#e2); SSD-FL's eq. 37 and H use it too."""
    tau_a: NonNegativeInt = 3
    """Training (intra-cluster) iterations per cycle."""
    tau_r: NonNegativeInt = 1
    """Communication-only (inter-cluster) iterations per cycle."""
    local_steps: LocalSteps = "epoch"
    """Mini-batch steps per iteration: `epoch` is ceil(D_i / M) (docs/protocols/ssd-fl.md#e1);
    1 is eq. 11 exactly."""
    optimizers: Literal["random", "sgd", "topology"] = "random"
    """Each device's optimizer: drawn uniformly over sgd/prox/momentum (Sec. VI-A), plain SGD
    everywhere (App. G-B), or the topology's node attribute `optimizer`."""
    prox_mu: Draws = (5e-5, 1e-4)
    """What a proximal device draws its mu from, uniformly (Sec. VI-A)."""
    momentum_rho: Draws = (0.8, 0.85)
    """What a momentum device draws its rho from, uniformly (Sec. VI-A)."""

    @field_validator("tau_r")
    @classmethod
    def _an_iteration(cls, value: int, info: ValidationInfo) -> int:
        if value == 0 and info.data.get("tau_a") == 0:
            raise ValueError("must be at least 1 when tau_a is 0 (a cycle needs an iteration)")
        return value


class SSDFLHyper(CycleHyper):
    regimes: Literal["clustered", "global"] = "clustered"
    """clustered: A~ in the intra regime, A in the inter regime; global: A in both
    (synchronous DFL, the S = 1 check)."""
    sample_size: Count = 100
    """|D_i|: raw samples per device for eq. 40 (docs/protocols/ssd-fl.md#c13)."""
    loss_sample: Count | None = None
    """L_i(theta^0) over this many of the device's training samples, drawn from its own
    stream; None: over its whole shard, as the paper. A smoke run sets it: the whole shards'
    forward pass was half the CPU of a one-cycle reproduction."""
    clustering: ClusteringSettings = ClusteringSettings()
    """Algorithm 1 (the pre-phase)."""

    @field_validator("tau_a")
    @classmethod
    def _trains(cls, value: int) -> int:
        if value < 1:
            raise ValueError("must be >= 1")
        return value


class SDFLHyper(CycleHyper):
    init_spread: NonNegative = 0.0
    """> 0: per-device N(0, s^2) noise on the shared init (never in the paper; consensus
    studies only)."""


class PDFLHyper(SDFLHyper):
    """sDFL's settings; tau_a = 0 is pure gossip."""


class STCHyper(SDFLHyper):
    p_edge: Annotated[Positive, Field(le=1)] = 0.5
    """The probability that an iteration keeps an edge of G (docs/protocols/ssd-fl.md#baselines)."""


class CSTCHyper(STCHyper):
    clusters_min: Count = 2
    """The fewest clusters S is drawn from."""
    clusters_max: Count | None = None
    """The most clusters S is drawn from; null: floor(N/2) (docs/protocols/ssd-fl.md#baselines)."""

    @field_validator("clusters_max")
    @classmethod
    def _at_least_min(cls, value: int | None, info: ValidationInfo) -> int | None:
        low = info.data.get("clusters_min")
        if value is not None and low is not None and value < low:
            raise ValueError(f"must be at least clusters_min ({low})")
        return value


H = TypeVar("H", bound=CycleHyper)


class Clustering(PrePhase):
    """SSD-FL's pre-phase: Algorithm 1 over every device's report, in the coordinator."""

    def coordinate(self, plan: RunPlan,
                   reports: Mapping[int, Mapping[str, np.ndarray]]) -> Coordination:
        from protocols.ssdfl.coordinator import coordinate_clusters

        return coordinate_clusters(plan, reports, run_clustering(plan))


def check_clustering(plan: RunPlan) -> None:
    """The default check, and Algorithm 1's inputs (its overrides against the plan's nodes)."""
    model_fits_data(plan)
    run_clustering(plan)


def run_clustering(plan: RunPlan) -> ClusteringConfig:
    """Algorithm 1's inputs for the plan (its hyper-parameters, mixing and node ids). The
    algorithm's module (numpy) is imported here, where a plan is checked, not with the
    declaration, which a refusal of bad input reads."""
    from protocols.ssdfl.coordinator import clustering_config

    hyper = SSDFLHyper.model_validate(plan.hyper)
    return clustering_config(plan, hyper.clustering, hyper.lr, hyper.tau_a)


# SDFL declares what every protocol that runs SSD-FL's global cycle declares alike; SSD-FL adds
# its pre-phase, its check and the family's table, the other baselines differ in their settings.
SDFL_SPEC: ProtocolDeclaration[CycleHyper] = ProtocolDeclaration(
    SDFLHyper, report_family="ssd-fl", node_attributes=SSDFLNodeAttributes,
    cycle_groups="cluster",  # each node's cluster, in its metrics records
    # A quick first run (about 5 minutes on 2 cores on er30) with the paper's algorithm:
    # Fashion-MNIST in "mild" label slots (3 classes per device, docs/protocols/ssd-fl.md#e4),
    # the small default CNN, 5 mini-batch steps per iteration instead of one epoch (the paper's
    # full settings: --config protocols/configs/ssd-fl-paper.yaml), 20 global cycles, per-cycle
    # metrics with the paper's FMNIST thresholds (extreme, mild; ssd-fl.md#evaluation).
    run_defaults={"dataset": "fmnist", "partition": "shards:3", "hyper": {"local_steps": 5},
                  "cycle_metrics": {"params_every": 1, "thresholds": [0.40, 0.45, 0.65, 0.72]}})
SSDFL_SPEC = replace(SDFL_SPEC, Hyper=SSDFLHyper, capabilities=(Clustering(),),
                     report_table=report_table.TABLE, check_plan=check_clustering)
PDFL_SPEC = replace(SDFL_SPEC, Hyper=PDFLHyper)
STC_SPEC = replace(SDFL_SPEC, Hyper=STCHyper)
CSTC_SPEC = replace(SDFL_SPEC, Hyper=CSTCHyper)
