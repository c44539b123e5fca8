"""What the launcher knows of the dynamic-graph family (SGP, Epidemic Learning): their settings
and capabilities (protocols/declaration.py). The algorithms are the node classes in this package's
other modules."""

from __future__ import annotations

from dfl_config.section import Count
from protocols.capabilities import DynamicGraphs
from protocols.declaration import ProtocolDeclaration
from protocols.dynamic import report_table
from protocols.hyper import DenseAccounting, TrainingHyper
from protocols.run_defaults import GOSSIP_FMNIST


class SGPHyper(TrainingHyper):
    accounting: DenseAccounting = DenseAccounting()
    """Formula constants: (P + 1) b_fp bits per out-arc and round (the model and the Push-Sum
    weight), plus b_hdr."""


class EpidemicHyper(TrainingHyper):
    local_steps: Count = 1
    """H: local SGD steps per round before the model is pushed."""
    accounting: DenseAccounting = DenseAccounting()
    """Formula constants: P b_fp bits per out-arc and round, plus b_hdr."""


SGP_SPEC = ProtocolDeclaration(SGPHyper, capabilities=(DynamicGraphs(),), report_family="sgp",
                               report_table=report_table.TABLE, run_defaults=GOSSIP_FMNIST)
EPIDEMIC_SPEC = ProtocolDeclaration(EpidemicHyper, capabilities=(DynamicGraphs(),),
                                    report_family="sgp", run_defaults=GOSSIP_FMNIST)
