"""The DSC family's `hyper:` blocks: one model per protocol, each default declared once.

`DSCHyper` is dsc's (and dsc-max's and dsc-noagg's, which ignore the keys of Eq. 18 and, for
dsc-noagg, J: the family's runs share one config); dsc-fedavg and dsc-fedamp extend it with the
keys of their weights. The local training's keys are `MultiTaskTrainingHyper`'s, which
multitask_training.py's trainer reads. The launcher validates them all
(protocols/declaration.py), so nothing here imports torch.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from dfl_config.section import Count, Flag, NonNegative, NonNegativeInt, Number, Positive
from protocols.dsc.taskdata import Task
from protocols.hyper import TrainingHyper

Mixing = Literal["column_softmax", "push_sum", "row_softmax"]
PolicyScope = Literal["client", "task"]
FedAvgVariant = Literal["column_uniform", "row_uniform", "metropolis"]


def _open_unit(value: float) -> float:
    if not 0 < value < 1:
        raise ValueError(f"must be in (0, 1), got {value:g}")
    return value


class MultiTaskTrainingHyper(TrainingHyper):
    """The local training's settings, shared by the DSC family's hyper models. Mini-run
    defaults (docs/protocols/dsc.md#a15, #a20); the paper's full runs use lr = policy_lr = 1e-4
    (and decoder_lr None, the paper's one step size)."""

    lr: Positive = 0.05
    """SGD step size on the backbone (and on the decoders where `decoder_lr` is None)."""
    decoder_lr: Positive | None = 0.005
    """SGD step size on the decoders (a tenth of the mini run's `lr`); None: `lr`
    (docs/protocols/dsc.md#a20)."""
    batch_size: Count = 16
    """Mini-batch size."""
    momentum: NonNegative = 0.9
    """SGD momentum, kept across rounds."""
    weight_decay: NonNegative = 1e-4
    """SGD weight decay."""
    policy_lr: Positive = 1e-2
    """Adam step size on the routing logits."""
    sparsity: NonNegative = 1e-3
    """lambda_sp, the pull of the logits towards skipping (docs/protocols/dsc.md#a4)."""
    sharing: NonNegative = 0.05
    """lambda_sh, the pull of the tasks' bottom blocks towards being shared."""
    gumbel_t0: Positive = 5.0
    """The Gumbel temperature once policies are learned."""
    gumbel_decay: Positive = 0.9
    """The temperature's factor per epoch."""
    warmup_epochs: NonNegativeInt = 0
    """Epochs with every block run and the logits frozen (docs/protocols/dsc.md#a4)."""
    straight_through: Flag = True
    """Hard Gumbel samples with soft gradients."""
    task_weights: dict[Task, NonNegative] = Field(default_factory=dict)
    """lambda_t per task; a task not named weighs 1."""
    standardise_depth: Flag = True
    """Dep's decoder learns the node's training depths standardised, (d - mean) / std, and is
    read back in metres; false: it outputs metres (docs/protocols/dsc.md#a20)."""


class DSCHyper(MultiTaskTrainingHyper):
    epochs: Count = 2
    """E: local epochs per round."""
    depth: Count = 5
    """J: mixing steps per round, one TDMA frame each (the paper's deep setting)."""
    tau: Positive = 0.1
    """Eq. 18's temperature (docs/protocols/dsc.md#a3)."""
    mixing: Mixing = "column_softmax"
    """column_softmax: the paper; push_sum, row_softmax: ablations (docs/protocols/dsc.md#a1)."""
    delta_baseline: str | None = None
    """A dsc-noagg run directory: the summary gets Delta_all (Eq. 42-44) against it."""
    policy_scope: PolicyScope = "client"
    """client: u_{i,t} learned by each client (the paper, #a5); task: the logits of task t
    averaged over the neighbours holding t every round (docs/protocols/dsc.md#a19)."""
    warmup_rounds: NonNegativeInt = 1
    """Rounds whose local epochs run every block with the logits frozen before policies are
    learned (the spec's optional warm-up, docs/protocols/dsc.md#a4)."""
    payload_bytes: Count | None = None
    """What the clock and the formula charge for psi in a PARAMS message, in bytes (Fig. 9:
    44706048 for ResNet-18, 85138688 for ResNet-34); None: its real size. The real psi still
    travels (docs/protocols/dsc.md#payload-override)."""

    def training(self) -> MultiTaskTrainingHyper:
        """The local trainer's settings: `warmup_rounds` is counted in epochs there, and the
        longer of the two warm-ups wins, so setting either one is enough."""
        epochs = max(self.warmup_epochs, self.warmup_rounds * self.epochs)
        return self.model_copy(update={"warmup_epochs": epochs})


class DSCFedAvgHyper(DSCHyper):
    fedavg: FedAvgVariant = "column_uniform"
    """w_{i,n}: column_uniform 1/(d_n+1), row_uniform 1/(d_i+1), metropolis."""


class DSCFedAMPHyper(DSCHyper):
    fedamp_sigma: Positive = 25.0
    """The attention's scale on the cosines of models."""
    fedamp_xi_self: Annotated[Number, AfterValidator(_open_unit)] | None = None
    """The weight a node keeps on its own model; None: 1 / (d_i + 1)."""
