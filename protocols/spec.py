"""What the launcher knows of a protocol: its declaration, a class that imports no torch.

A protocol comes in two parts. Its spec (a `ProtocolSpec` subclass, what the
`dfl_mesh.protocols` entry point names) declares everything the launcher reads: the settings
(`Hyper`), the capabilities (mix-ins from protocols/capabilities.py), the checks of a plan, what
`dfl-launch` and `dfl-report` show, and the launcher-side halves of capabilities (a pre-phase's
coordinator, a run report's keys). Its node class, registered by the same name under
`dfl_mesh.protocol_nodes`, subclasses the spec and protocols.base.Protocol and holds the
algorithm; only a node imports it (protocols/registry.py's `node_class`), and torch with it.

So resolving a plan, validating a config, submitting a Slurm job and following it to the end
import no torch: on a login host that is seconds, and on the lab's 2 cores, where the job's
hosts import torch at the same time, it is a third of the mesh's start (docs/benchmarks.md).

A plugin that registers its Protocol class itself under `dfl_mesh.protocols` alone still works:
that class is its own spec and its own node class, and the launcher then imports its module,
torch included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from dfl_config.section import Section
from dfl_node.plan import RunPlan
from dfl_node.settings.model import check_fits
from protocols.describe import ACCURACY, DatasetPreparer, MultiTask, ReportTable, Score
from protocols.hyper import ProtocolHyper

if TYPE_CHECKING:
    import click

H = TypeVar("H", bound=ProtocolHyper)


class ProtocolSpec(Generic[H]):
    """A protocol's declaration. Its defaults are those of a protocol that declares nothing."""

    # The protocol's settings: a typed model whose defaults are the protocol's defaults. The
    # launcher validates `hyper` against it (exit 2 on an unknown key or bad value); the node
    # gets it, validated, as `self.hyper`.
    Hyper: ClassVar[type[ProtocolHyper]] = ProtocolHyper

    # Set from the capability mix-ins a spec inherits (read by launcher and runtime).
    server_based: ClassVar[bool] = False
    needs_prephase: ClassVar[bool] = False
    survives_failures: ClassVar[bool] = False
    dynamic_graphs: ClassVar[bool] = False

    # What the launcher shows of the protocol (protocols/describe.py), read through the
    # registry; the launcher knows no protocol by name.
    # dfl-report's table for this protocol: the registry name of its family's lead protocol,
    # which alone declares `report_table`. Rows follow the registry's order.
    report_family: ClassVar[str | None] = None
    report_table: ClassVar[ReportTable | None] = None
    # What the metrics records' `accuracy` holds (DSC: a task score).
    score: ClassVar[Score] = ACCURACY
    # Several tasks per node: task plots and the gain over a baseline run, not accuracy curves.
    multitask: ClassVar[MultiTask | None] = None
    # The metrics key whose value groups nodes (SSD-FL's clusters) in per-cycle metrics:
    # per-group accuracy means and consensus gaps. None: the network is one group.
    cycle_groups: ClassVar[str | None] = None
    # `dfl-launch` sub-commands the protocol brings (DSC's `jstar`).
    launch_commands: ClassVar[tuple[click.Command, ...]] = ()
    # Datasets the protocol brings, by `--dataset` name (DSC's rendered `scenes`).
    datasets: ClassVar[Mapping[str, DatasetPreparer]] = {}
    # Node attributes of topology files the protocol reads (SSD-FL's `optimizer`): one model
    # whose fields are the attributes; a topology's node keys are validated against them.
    node_attributes: ClassVar[type[Section] | None] = None
    # Models the protocol brings for the `model:` section (DSC's `routed`): spec models with a
    # `name: Literal[...]` field, validated like the runtime's own models.
    model_specs: ClassVar[tuple[type[Section], ...]] = ()
    # The options of the datasets it brings, by config section (DSC's `scenes:`).
    dataset_options: ClassVar[Mapping[str, type[Section]]] = {}

    @classmethod
    def check_plan(cls, plan: RunPlan) -> None:
        """Raise ValueError (one line) on a plan this protocol cannot run, for checks that need
        the nodes or the data section; the launcher calls it so that this, too, is exit 2
        before any node starts. Default: the plan's model takes the plan's data (its spec's
        `check`, dfl_node/settings/model.py)."""
        check_fits(plan.model, plan.data["shape"], plan.data["num_classes"])
