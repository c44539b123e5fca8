"""What the launcher knows of the gossip family (D-PSGD, DSGT, q-FFL): their settings and
capabilities (protocols/declaration.py). The algorithms are the node classes in this package's other
modules."""

from __future__ import annotations

from typing import Literal

from dfl_config.section import NonNegative, NonNegativeInt, Positive
from protocols.capabilities import (
    DynamicGraphs,
    RobustAggregation,
    ServerBased,
    SurvivesFailures,
)
from protocols.declaration import ProtocolDeclaration
from protocols.hyper import DenseAccounting, TrainingHyper
from protocols.robust.aggregation_settings import DEFAULT_AGGREGATION, Aggregation
from protocols.run_defaults import DMFLSQ_PAPER, GOSSIP_FMNIST


class DPSGDHyper(TrainingHyper):
    local_steps: NonNegativeInt = 10
    """SGD steps per round, the last one the D-PSGD step; 0: gossip averaging alone."""
    form: Literal["cta", "atc"] = "cta"
    """cta: combine-then-adapt (Lian et al.); atc: sum_j W_ij (w_j - lr g_j)."""
    accounting: DenseAccounting = DenseAccounting()
    aggregation: Aggregation = DEFAULT_AGGREGATION
    """The rule the neighbourhood is mixed with (docs/protocols/robust.md): mean, gossip's
    sum_j W_ij w_j, or a robust rule ({rule: clipped-gossip, delta: 0.34}, ...)."""


class DSGTHyper(TrainingHyper):
    lr: Positive = 0.045
    """alpha_t = lr / sqrt(t + 1)."""
    tracker_clip: NonNegative = 1.2
    """||y_i|| is clipped to this after each update; 0 turns clipping off."""

    def step_size_law(self) -> str:
        return f"{self.lr:g}/sqrt(t+1)"
    accounting: DenseAccounting = DenseAccounting()
    """Formula constants: 2 P b_fp bits per link and round, plus b_hdr."""


class QFFLHyper(TrainingHyper):
    lr: Positive = 0.18
    """Step size of dw_k = L lr g_k."""
    q: NonNegative = 1.0
    """Fairness exponent; 0 is FedSGD."""
    lipschitz: Positive = 2.0
    """L, the Lipschitz constant of the gradient."""
    grad_clip: NonNegative = 0.5
    """clip_norm of each client's gradient; 0 turns clipping off."""
    accounting: DenseAccounting = DenseAccounting()
    """Formula constants: P b_fp bits per message each way, plus b_hdr."""


DPSGD_SPEC = ProtocolDeclaration(DPSGDHyper,
                                 capabilities=(SurvivesFailures(), DynamicGraphs(),
                                               RobustAggregation()),
                                 report_family="dmfl-sq",  # compared in the DMFL-SQ paper's table
                                 run_defaults=GOSSIP_FMNIST)
# The DMFL-SQ paper's baselines, run as DMFL-SQ is.
DSGT_SPEC = ProtocolDeclaration(DSGTHyper, report_family="dmfl-sq", run_defaults=DMFLSQ_PAPER)
QFFL_SPEC = ProtocolDeclaration(QFFLHyper, capabilities=(ServerBased(),),
                                report_family="dmfl-sq", run_defaults=DMFLSQ_PAPER)
