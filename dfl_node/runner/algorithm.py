"""What the runtime drives: the structural interface every protocol class satisfies.

The runtime knows no protocol. The launcher looks the class up by name and hands it to
`run_node`; this interface is all the runtime may assume of it, so that `dfl_node` never
imports `protocols` (the layer contract in pyproject.toml).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from dfl_node.plan import RunPlan
from dfl_node.runner.context import NodeContext
from dfl_node.runner.membership import SurvivingGraph
from dfl_node.state.checkpoint_file import State


class NodeAlgorithm(Protocol):
    """One node's protocol object, as the runtime sees it. What a protocol may do beyond rounds
    (a pre-phase, surviving failures, a run-level report) it opts into; the runtime asks with
    isinstance against the capabilities below before calling one."""

    @property
    def needs_prephase(self) -> bool: ...  # read only: a protocol declares it in its spec

    def run_round(self, r: int) -> dict[str, float]: ...

    def evaluate(self) -> dict[str, Any]: ...

    def eval_model(self) -> nn.Module: ...

    def extra_state(self) -> dict[str, torch.Tensor]: ...

    def summary(self) -> dict[str, float | dict[str, float]]: ...

    def checkpoint_state(self) -> State: ...

    def restore_state(self, state: State) -> None: ...


@runtime_checkable
class FailureAware(Protocol):
    def on_graph_change(self, graph: SurvivingGraph) -> None: ...


@runtime_checkable
class Reporting(Protocol):
    def node_report(self) -> dict[str, Any]: ...


class AlgorithmClass(Protocol):
    """A protocol class: builds its node's workload, then one object per node."""

    def __call__(self, ctx: NodeContext) -> NodeAlgorithm: ...

    def build_workload(self, plan: RunPlan, node_id: int) -> tuple[nn.Module, Any]: ...
