"""DSC's baselines (docs/protocols/dsc-*.md): same local training, TDMA schedule and J as `dsc`;
only the weights and what travels differ.

| protocol    | w_{i,n}                                            | per link and step | per round |
|-------------|----------------------------------------------------|-------------------|-----------|
| dsc-noagg   | W = I (J irrelevant)                               | nothing           | nothing   |
| dsc-fedavg  | column_uniform 1/(d_n+1) (default), row_uniform    | psi               | -         |
|             | 1/(d_i+1), metropolis 1/(1+max(d_i,d_n))           |                   |           |
| dsc-max     | Eq. 18 with S^max (one good task pair suffices)    | psi + w           | policies  |
| dsc-fedamp  | HeurFedAMP: xi_self on i, (1-xi_self) softmax of   | psi               | -         |
|             | sigma cos(psi_i, psi_n) over N_i, at step 1        |                   |           |

FedAvg's and FedAMP's weights need nothing from the neighbours beyond the plan (degrees) and the
models of step 1, so their messages carry psi alone. FedAMP's proximal term is not used (the
paper describes FedAMP only by its aggregation weights; docs/protocols/dsc.md#a6). Their settings
and what the launcher reads are their specs' (`protocols/dsc/declarations.py`).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from protocols.dsc.declarations import (
    DSC_FEDAMP_SPEC,
    DSC_FEDAVG_SPEC,
    DSC_MAX_SPEC,
    DSC_NOAGG_SPEC,
)
from protocols.dsc.hyper import DSCFedAMPHyper, DSCFedAvgHyper
from protocols.dsc.mixing_weights import Weights, fedamp_row, fedavg_row, model_cosine
from protocols.dsc.node import DSC
from protocols.sdk import Received


class DSCNoAgg(DSC):
    """Local training only: the reference that Delta (Eq. 42) is measured against."""

    spec = DSC_NOAGG_SPEC
    uses_eq18 = False

    @property
    def depth(self) -> int:
        return 0

    def prepare_round(self, r: int) -> None:
        self.column, self.row = None, {self.me: 1.0}


class DSCMax(DSC):
    """Heuristic max aggregation: Eq. 18 with S^max_{i,n} = max_{t,t'} s(u_{i,t}, u_{n,t'})."""

    spec = DSC_MAX_SPEC
    affinity_kind = "max"


class DSCFedAvg(DSC):
    """Decentralized FedAvg: uniform weights that ignore tasks; no policy frame."""

    spec = DSC_FEDAVG_SPEC
    hyper: DSCFedAvgHyper
    uses_eq18 = False

    def prepare_round(self, r: int) -> None:
        plan = self.ctx.plan
        degrees = {n: len(plan.neighbors(n)) for n in self.ctx.comm.neighbors}
        self.column = None
        self.row = fedavg_row(self.hyper.fedavg, self.me, degrees, len(self.ctx.comm.neighbors))


class DSCFedAMP(DSC):
    """HeurFedAMP on one hop: attention over the cosine of the models received at step 1."""

    spec = DSC_FEDAMP_SPEC
    hyper: DSCFedAMPHyper
    uses_eq18 = False

    def prepare_round(self, r: int) -> None:
        self.column, self.row = None, None  # decided at step 1, then fixed for the round

    def step_row(self, row: Weights | None, psi: torch.Tensor,
                 theirs: Mapping[int, Received]) -> Weights:
        if row is not None:
            return row
        cosines = {n: model_cosine(psi.numpy(), msg["psi"].numpy())
                   for n, msg in theirs.items()}
        xi_self = self.hyper.fedamp_xi_self
        if xi_self is None:
            xi_self = 1.0 / (len(theirs) + 1)
        return fedamp_row(self.me, cosines, xi_self, self.hyper.fedamp_sigma)
