"""What the launcher knows of DMFL-SQ and its CHOCO-SGD baseline: their settings, with the
paper's defaults, and their capabilities (protocols/declaration.py). The algorithms are the node
classes in node.py and chocosgd.py."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

from dfl_config.section import Count, Flag, NonNegative, Positive
from protocols.capabilities import SurvivesFailures
from protocols.declaration import ProtocolDeclaration
from protocols.dmflsq import report_table
from protocols.dmflsq.bits import Accounting
from protocols.hyper import ProtocolHyper, TrainingHyper
from protocols.run_defaults import DMFLSQ_PAPER
from protocols.toolkit.accounting import MessageAccounting
from protocols.toolkit.compressor_configs import (
    CompositeConfig,
    CompressorConfig,
    TopKConfig,
    UniformConfig,
)
from protocols.toolkit.options import Schedule, TieBreak


def _auto(value: Any) -> Any:
    """`k_psi: null` is the older spelling of `auto`."""
    if value is None:
        return "auto"
    if value != "auto" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError("must be an integer >= 1 or auto")
    return value


class DMFLSQHyper(ProtocolHyper):
    """`hyper:` of a dmfl-sq run; the defaults are the paper's (Sec. VI)."""

    lr: Positive = 0.1
    """gamma, constant (docs/protocols/dmfl-sq.md#a3)."""
    lr_schedule: Literal["constant", "inv_sqrt_T"] = "constant"
    """constant, or inv_sqrt_T: gamma / sqrt(T), the theory's schedule."""

    def step_size_law(self) -> str | None:
        return f"{self.lr:g}/sqrt(T)" if self.lr_schedule == "inv_sqrt_T" else None

    alpha: NonNegative = 0.4
    """Graph coupling weight (eq. 2)."""
    rho: NonNegative = 0.5
    """Fairness weight (eq. 4)."""
    a_ij: Literal["unit", "from_topology"] = "unit"
    """a_ij = 1, or the topology edge's `weight` (A2)."""
    k_psi: Annotated[Count | Literal["auto"], BeforeValidator(_auto)] = "auto"
    """Max-consensus sub-rounds; auto: diam(G) of the topology (A23)."""
    tie_break: TieBreak = "larger_id"
    """On an exact float32 loss tie the larger id wins, or the smaller (A5)."""
    skip_consensus_when_rho0: Flag = True
    """With rho = 0 no consensus runs and none is charged (A14)."""
    batch_sel: Count = 32
    """Selection mini-batch (f_hat, eq. 9)."""
    batch_grad: Count = 32
    """Gradient mini-batch (g, eq. 10)."""
    trigger: Schedule = "inv_sqrt_t"
    """theta_t = theta0 / sqrt(t + 1), constant, or zero (always send)."""
    theta0: NonNegative = 0.5
    """theta_0."""
    compressor: CompressorConfig = CompositeConfig(sparsifier=TopKConfig(ratio=0.01),
                                               quantizer=UniformConfig(bits=8))
    """C = Q8 o Top_k, k = max(1, ceil(0.01 P)), global over the model (A7, A8)."""
    accounting: Accounting = Accounting()
    """Eqs. (18)-(19); b_q and b_scale follow the quantiser (8, 32)."""


class ChocoHyper(TrainingHyper):
    """`hyper:` of a choco-sgd run; the defaults are the DMFL-SQ paper's baseline settings."""

    lr: Positive = 0.018
    """eta."""
    gamma: Positive = 0.25
    """Consensus step gamma_c."""
    weight_decay: NonNegative = 5e-5
    copies_init: Literal["zero", "model"] = "zero"
    """x_hat^0 = 0 as in the CHOCO paper, or x^0 (model), for parity with DMFL-SQ."""
    compressor: CompressorConfig = CompositeConfig(sparsifier=TopKConfig(ratio=0.1),
                                               quantizer=UniformConfig(bits=8))
    """C = Q8 o Top_{0.1} of the difference to the public copy."""
    accounting: MessageAccounting = MessageAccounting()
    """Eq. (18) with chi = 1; b_q and b_scale follow the quantiser."""


FORMULA_BITS = "formula_bits"
"""The metrics key of a client's cumulative eq. 20 bits, B_tot / n so far."""

DMFLSQ_SPEC = ProtocolDeclaration(DMFLSQHyper, capabilities=(SurvivesFailures(),),
                                  report_family="dmfl-sq", report_table=report_table.TABLE,
                                  bits_metric=FORMULA_BITS, run_defaults=DMFLSQ_PAPER)
CHOCO_SPEC = ProtocolDeclaration(ChocoHyper,
                                 report_family="dmfl-sq",  # in the DMFL-SQ paper's table
                                 run_defaults=DMFLSQ_PAPER)
