"""What the launcher knows of a protocol: its declaration, an object that imports no torch.

A protocol comes in two parts. Its spec (a `ProtocolDeclaration` instance, what the
`dfl_mesh.protocols` entry point names) declares everything the launcher reads: the settings
(`Hyper`), the capabilities (parts from protocols/capabilities.py, with their launcher-side
halves: a pre-phase's coordinator, a run report's keys), the checks of a plan and what
`dfl-launch` and `dfl-report` show. Its node class, registered by the same name under
`dfl_mesh.protocol_nodes`, subclasses protocols.node_base.ProtocolNode, names the spec
(`spec = DPSGD_SPEC`) and holds the algorithm; only a node imports it
(protocols/registry.py's `node_class`), and torch with it. The spec is a part of the node
class, never a base: a node class declares nothing the launcher reads, so the two cannot
disagree, and a baseline derives its spec from its lead's (`dataclasses.replace`) and its
node class from the lead's node class, each once.

So resolving a plan, validating a config, submitting a Slurm job and following it to the end
import no torch: on a login host that is seconds, and on the lab's 2 cores, where the job's
hosts import torch at the same time, it is a third of the mesh's start (docs/benchmarks.md).

A plugin that registers its ProtocolNode class itself under `dfl_mesh.protocols` alone still works:
the class's `spec` is its declaration, and the launcher then imports its module, torch included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from dfl_config.section import Section
from dfl_node.plan import RunPlan
from dfl_node.settings.model import check_fits
from protocols.capabilities import (
    Capability,
    DynamicGraphs,
    PrePhase,
    RobustAggregation,
    RunReport,
    ServerBased,
    SurvivesFailures,
)
from protocols.describe import ACCURACY, DatasetPreparer, MultiTask, ReportTable, Score
from protocols.hyper import ProtocolHyper

if TYPE_CHECKING:
    import click

H = TypeVar("H", bound=ProtocolHyper)
C = TypeVar("C", bound=Capability)


def model_fits_data(plan: RunPlan) -> None:
    """The default plan check: the plan's model takes the plan's data (its spec's `check`,
    dfl_node/settings/model.py)."""
    check_fits(plan.model, plan.data.shape, plan.data.num_classes)


@dataclass(frozen=True, eq=False)
class ProtocolDeclaration(Generic[H]):
    """A protocol's declaration. Its defaults are those of a protocol that declares nothing."""

    # The protocol's settings: a typed model whose defaults are the protocol's defaults. The
    # launcher validates `hyper` against it (exit 2 on an unknown key or bad value); the node
    # gets it, validated, as `self.hyper`.
    Hyper: type[H]
    # What it may do beyond rounds (protocols/capabilities.py), read by launcher and runtime.
    capabilities: tuple[Capability, ...] = ()
    # The run keys its runs start from (dataset, partition, rounds, `hyper` values of a quick
    # first run, ...), where they differ from the run config model's defaults: the first layer
    # of every run's config, under `--config`, the options and `--set`
    # (launcher/config/layers.py). A baseline derived with `dataclasses.replace` inherits them;
    # docs/defaults.md says, per protocol, where each default comes from.
    run_defaults: Mapping[str, Any] = field(default_factory=dict)

    # What the launcher shows of the protocol (protocols/describe.py), read through the
    # registry; the launcher knows no protocol by name.
    # dfl-report's table for this protocol: the registry name of its family's lead protocol,
    # which alone declares `report_table`. Rows follow the registry's order.
    report_family: str | None = None
    report_table: ReportTable | None = None
    # What the metrics records' `accuracy` holds (DSC: a task score).
    score: Score = ACCURACY
    # The metrics key that holds a node's cumulative bits as the paper counts them (DMFL-SQ's
    # eq. 20 `formula_bits`): the live table's bits/client column. None: the column says n/a.
    bits_metric: str | None = None
    # Several tasks per node: task plots and the gain over a baseline run, not accuracy curves.
    multitask: MultiTask | None = None
    # The metrics key whose value groups nodes (SSD-FL's clusters) in per-cycle metrics:
    # per-group accuracy means and consensus gaps. None: the network is one group.
    cycle_groups: str | None = None
    # `dfl-launch` sub-commands the protocol brings (DSC's `jstar`).
    launch_commands: tuple[click.Command, ...] = ()
    # Datasets the protocol brings, by `--dataset` name (DSC's rendered `scenes`).
    datasets: Mapping[str, DatasetPreparer] = field(default_factory=dict)
    # Node attributes of topology files the protocol reads (SSD-FL's `optimizer`): one model
    # whose fields are the attributes; a topology's node keys are validated against them.
    node_attributes: type[Section] | None = None
    # Whether an adversary may poison its training data (label-flip, backdoor:
    # docs/protocols/robust.md): True for the runtime's classification workload, which
    # ProtocolNode.build_workload poisons; a protocol whose node class brings a workload of its
    # own (DSC's scenes) says False unless it poisons that itself, and the launcher refuses such
    # an adversary (exit 2).
    data_poisoning: bool = True
    # Models the protocol brings for the `model:` section (DSC's `routed`): spec models with a
    # `name: Literal[...]` field, validated like the runtime's own models.
    model_specs: tuple[type[Section], ...] = ()
    # The options of the datasets it brings, by config section (DSC's `scenes:`).
    dataset_options: Mapping[str, type[Section]] = field(default_factory=dict)
    # Raise ValueError (one line) on a plan this protocol cannot run, for checks that need the
    # nodes or the data section; the launcher calls it so that this, too, is exit 2 before any
    # node starts.
    check_plan: Callable[[RunPlan], None] = model_fits_data

    def __post_init__(self) -> None:
        robust = self.capability(RobustAggregation)
        if robust is not None and robust.key not in self.Hyper.model_fields:
            raise TypeError(f"{self.Hyper.__name__} declares no `{robust.key}` field, which "
                            "RobustAggregation reads (protocols/capabilities.py)")

    def capability(self, kind: type[C]) -> C | None:
        """The declared capability of this (concrete) kind, if any."""
        return next((c for c in self.capabilities if isinstance(c, kind)), None)

    @property
    def prephase(self) -> PrePhase | None:
        """The declared pre-phase (its coordinator's side), if any."""
        return next((c for c in self.capabilities if isinstance(c, PrePhase)), None)

    @property
    def run_report(self) -> RunReport | None:
        """The declared run report (its `run_keys`), if any."""
        return next((c for c in self.capabilities if isinstance(c, RunReport)), None)

    @property
    def needs_prephase(self) -> bool:
        return self.prephase is not None

    @property
    def server_based(self) -> bool:
        return self.capability(ServerBased) is not None

    @property
    def survives_failures(self) -> bool:
        return self.capability(SurvivesFailures) is not None

    @property
    def dynamic_graphs(self) -> bool:
        return self.capability(DynamicGraphs) is not None

    @property
    def robust_aggregation(self) -> bool:
        return self.capability(RobustAggregation) is not None

    def check(self, plan: RunPlan) -> None:
        """Every check of a plan the protocol makes (ValueError, one line): its own
        `check_plan`, then its capabilities' (a robust rule against the graph's in-degrees)."""
        self.check_plan(plan)
        robust = self.capability(RobustAggregation)
        if robust is not None:
            robust.check_plan(plan, self.settings(plan.hyper))

    def settings(self, hyper: Mapping[str, Any]) -> H:
        """`hyper` as this protocol's model (outside a node, which has `self.hyper`)."""
        return self.Hyper.model_validate(hyper)
