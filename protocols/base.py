"""The protocol interface: one object per node, driven round by round by the runtime.

A protocol speaks only through `ctx.comm` and advances `ctx.clock` by its schedule; it never
touches a socket, a file or the collector.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import nn

from dfl_node.learning.models import build_model
from dfl_node.learning.shards import load_node_data
from dfl_node.learning.training import evaluate
from dfl_node.plan import RunPlan
from dfl_node.runner.context import NodeContext
from dfl_node.runner.membership import SurvivingGraph
from dfl_node.runner.prephase_client import Coordination
from dfl_node.state.checkpoint_file import State
from dfl_node.state.codec import capture, capture_fields, restore, restore_fields
from protocols.describe import ACCURACY, DatasetPreparer, MultiTask, ReportTable, Score

if TYPE_CHECKING:
    import click


class Protocol(ABC):
    # Server-based protocols (q-FFL) get an aggregator node in the plan beside the clients.
    server_based: ClassVar[bool] = False

    # True: the runtime runs a one-time pre-phase before round 0 (report -> coordinator ->
    # answer; dfl_node/runner/prephase_client.py), with the three methods below.
    needs_prephase: ClassVar[bool] = False

    # True: the protocol has documented rules for losing a node (docs/failures.md), so a run may use
    # `--on-failure continue`; the runtime then calls `on_graph_change` when the survivors
    # agree on a smaller graph. Others refuse `continue` before anything starts.
    survives_failures: ClassVar[bool] = False

    # Attributes (dotted paths reach inside) whose state the next round reads beside the model:
    # samplers, copies, trackers, counters. A checkpoint saves them (dfl_node/state/codec.py).
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

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx

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

    def on_graph_change(self, graph: SurvivingGraph) -> None:
        """From the next round on, run on `graph` (dead nodes gone; `--on-failure continue`)."""
        raise NotImplementedError(f"{type(self).__name__} does not survive failures")

    def prephase_report(self) -> dict[str, np.ndarray]:
        """What this node tells the coordinator (named arrays)."""
        raise NotImplementedError(f"{type(self).__name__} has no pre-phase")

    def prephase_answer(self, answer: Mapping[str, np.ndarray]) -> None:
        """Take the coordinator's answer; raise ValueError if it is malformed."""
        raise NotImplementedError(f"{type(self).__name__} has no pre-phase")

    @staticmethod
    def coordinate(plan: RunPlan, reports: Mapping[int, Mapping[str, np.ndarray]]) -> Coordination:
        """The coordinator's side: every node's report in, an answer per node out (runs once,
        in the coordinator process). Raise ValueError (one line) on reports it cannot use."""
        raise NotImplementedError("this protocol has no pre-phase")

    @staticmethod
    def check_hyper(hyper: Mapping[str, Any]) -> None:
        """Raise ValueError (one line) on a bad `hyper` setting; the launcher calls it so that a
        bad setting is exit 2 before any node starts."""
        require_int(hyper, "torch_threads", 1)

    @classmethod
    def check_plan(cls, plan: RunPlan) -> None:
        """Raise ValueError (one line) on a plan this protocol cannot run, for checks that need
        the nodes or the data section; the launcher calls it so that this, too, is exit 2
        before any node starts. Default: `build_workload`'s model fits the plan's data."""
        build_model(plan.model, plan.data["shape"], plan.data["num_classes"], plan.seed)


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
        acc, loss = evaluate(self.eval_model(), self.ctx.data.x_eval, self.ctx.data.y_eval,
                             self.ctx.device)
        return {"accuracy": acc, "loss": loss}

    def eval_model(self) -> nn.Module:
        """The model that evaluation and `final/` report (personalised protocols may differ)."""
        return self.ctx.model

    def summary(self) -> dict[str, float | dict[str, float]]:
        """Protocol keys for summary.json; the launcher averages them over nodes."""
        return {}

    def extra_state(self) -> dict[str, torch.Tensor]:
        """Tensors beside the model worth keeping (e.g. neighbour copies), saved in final/."""
        return {}

    def node_report(self) -> dict[str, Any]:
        """What this node tells the launcher at the end that is not averaged over nodes (its
        final per-task metrics, its row of a mixing matrix); goes to `run_keys`."""
        return {}

    @classmethod
    def run_keys(cls, plan: RunPlan, reports: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
        """summary.json keys that need every client's `node_report` at once (e.g. rho of a
        matrix whose rows live on different nodes); computed by the launcher."""
        return {}


def require_int(hyper: Mapping[str, Any], key: str, default: int, minimum: int = 1) -> None:
    value = hyper.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{key} must be an integer >= {minimum}, got {value!r}")


def require_positive(hyper: Mapping[str, Any], key: str) -> None:
    value = hyper.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{key} must be a number > 0, got {value!r}")
