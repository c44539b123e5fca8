"""The protocol interface: one object per node, driven round by round by the runtime.

A protocol speaks only through `ctx.comm` and advances `ctx.clock` by its schedule; it never
touches a socket, a file or the collector.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np
import torch
from torch import nn

from dfl_config.section import Section
from dfl_node.learning.models import build_model
from dfl_node.learning.shards import load_node_data
from dfl_node.learning.training import evaluate
from dfl_node.plan import RunPlan
from dfl_node.runner.context import NodeContext
from dfl_node.settings.model import check_fits
from dfl_node.state.checkpoint_file import State
from dfl_node.state.codec import capture, capture_fields, restore, restore_fields
from protocols.describe import ACCURACY, DatasetPreparer, MultiTask, ReportTable, Score
from protocols.hyper import ProtocolHyper

if TYPE_CHECKING:
    import click


H = TypeVar("H", bound=ProtocolHyper)

# Samples per forward pass when a node evaluates. A pass's activations are the largest buffers a
# node ever holds: 256 CIFAR/Fashion-MNIST samples through dmflsq-cnn took its PSS from about
# 65 MB in the rounds to 130 MB while it evaluated; 64 keep evaluation within the rounds' memory.
EVAL_BATCH = 64


class Protocol(ABC, Generic[H]):
    """One node's algorithm. Capabilities beyond rounds are mix-ins (protocols/capabilities.py);
    the building blocks of a round are in protocols/sdk."""

    # The protocol's settings: a typed model whose defaults are the protocol's defaults. The
    # launcher validates `hyper` against it (exit 2 on an unknown key or bad value); the node
    # gets it, validated, as `self.hyper`.
    Hyper: ClassVar[type[ProtocolHyper]] = ProtocolHyper

    # Set from the capability mix-ins a class inherits (read by launcher and runtime).
    server_based: ClassVar[bool] = False
    needs_prephase: ClassVar[bool] = False
    survives_failures: ClassVar[bool] = False

    # Attributes (dotted paths reach inside) whose state the next round reads beside the model:
    # samplers, copies, trackers, counters. A checkpoint saves them (dfl_node/state/codec.py);
    # the resume test of every registered protocol fails when one is missing.
    checkpoint_fields: tuple[str, ...] = ()

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

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.hyper: H = type(self).Hyper.model_validate(ctx.hyper)  # type: ignore[assignment]

    def checkpoint_state(self) -> State:
        """Everything the next round reads: the model (parameters and buffers) and the
        `checkpoint_fields`. Override where state lives elsewhere."""
        state = capture_fields(self)
        state.put("model", capture(self.ctx.model))
        return state

    def restore_state(self, state: State) -> None:
        """Put back what `checkpoint_state` saved, into a freshly constructed protocol."""
        restore(self.ctx.model, state.part("model"))
        restore_fields(self, state)

    @classmethod
    def check_plan(cls, plan: RunPlan) -> None:
        """Raise ValueError (one line) on a plan this protocol cannot run, for checks that need
        the nodes or the data section; the launcher calls it so that this, too, is exit 2
        before any node starts. Default: `build_workload`'s model fits the plan's data."""
        check_fits(plan.model, plan.data["shape"], plan.data["num_classes"])

    @classmethod
    def build_workload(cls, plan: RunPlan, node_id: int) -> tuple[nn.Module, Any]:
        """The node's model (on the CPU) and data, before the protocol object exists.

        Default: the plan's classification shard and model. A protocol with another learning
        problem (DSC's multi-task dense prediction) brings its own; raise ValueError (one line)
        on a plan it cannot serve."""
        data = load_node_data(plan.data, plan.clients, node_id)
        return build_model(plan.model, data.input_shape, data.classes, plan.seed), data

    @abstractmethod
    def run_round(self, r: int) -> dict[str, float]:
        """Run round `r`; return protocol metrics for this round (e.g. `train_loss`)."""

    def evaluate(self) -> dict[str, Any]:
        """The evaluation keys of a metrics record: `accuracy` and `loss`, plus any others."""
        data = self.ctx.data
        acc, loss = evaluate(self.eval_model(), data.x_eval, data.y_eval, self.ctx.device,
                             batch=EVAL_BATCH)
        out = {"accuracy": acc, "loss": loss}
        both: tuple[np.ndarray, np.ndarray] | None = getattr(data, "global_eval", None)
        if both is not None:  # eval_split: both
            acc, loss = evaluate(self.eval_model(), both[0], both[1], self.ctx.device,
                                 batch=EVAL_BATCH)
            out |= {"global_accuracy": acc, "global_loss": loss}
        return out

    def eval_model(self) -> nn.Module:
        """The model that evaluation and `final/` report (personalised protocols may differ)."""
        return self.ctx.model

    def summary(self) -> dict[str, float | dict[str, float]]:
        """Protocol keys for summary.json; the launcher averages them over nodes."""
        return {}

    def extra_state(self) -> dict[str, torch.Tensor]:
        """Tensors beside the model worth keeping (e.g. neighbour copies), saved in final/."""
        return {}
