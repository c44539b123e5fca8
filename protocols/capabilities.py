"""What a protocol may do beyond running rounds, each opted into by inheriting its mix-in.

A protocol that does not inherit a capability has none of its methods, so nothing is a silent
no-op: the launcher refuses `--on-failure continue` for a protocol without `SurvivesFailures`,
plans a coordinator only for `PrePhase` and an aggregator only for `ServerBased`, and the
runtime calls these methods only on protocols that have them.

A protocol's spec inherits the mix-in (protocols/spec.py), so the launcher sees the capability
without importing the node class; the spec implements the launcher's half (a pre-phase's
`coordinate`, a run report's `run_keys`), the node class, which subclasses the spec, the node's.
Nothing here imports torch.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from dfl_node.plan import RunPlan
from dfl_node.runner.prephase_client import Coordination

if TYPE_CHECKING:
    from dfl_node.runner.membership import SurvivingGraph


class PrePhase:
    """A one-time pre-phase before round 0: every node reports to a coordinator, which answers
    each (dfl_node/runner/prephase_client.py; SSD-FL's clustering)."""

    needs_prephase: ClassVar[bool] = True

    @abstractmethod
    def prephase_report(self) -> dict[str, np.ndarray]:
        """What this node tells the coordinator (named arrays)."""

    @abstractmethod
    def prephase_answer(self, answer: Mapping[str, np.ndarray]) -> None:
        """Take the coordinator's answer; raise ValueError if it is malformed."""

    @staticmethod
    @abstractmethod
    def coordinate(plan: RunPlan, reports: Mapping[int, Mapping[str, np.ndarray]]) -> Coordination:
        """The coordinator's side: every node's report in, an answer per node out (runs once,
        in the coordinator process). Raise ValueError (one line) on reports it cannot use."""


class SurvivesFailures:
    """Documented rules for losing a node (docs/failures.md): a run may use
    `--on-failure continue`, and the runtime calls `on_graph_change` once the survivors agree
    on a smaller graph."""

    survives_failures: ClassVar[bool] = True

    @abstractmethod
    def on_graph_change(self, graph: SurvivingGraph) -> None:
        """From the next round on, run on `graph` (dead nodes gone)."""


class DynamicGraphs:
    """Runs on directed and time-varying topologies (topologies/schedules.py): the protocol
    sends to the round's out-neighbours, gathers from its in-neighbours (the runtime sets both
    on the comm before each round) and reads any mixing weights per round
    (`plan.weight_row(node, r)`); the launcher refuses such a topology to any other protocol."""

    dynamic_graphs: ClassVar[bool] = True


class ServerBased:
    """An aggregator node beside the clients (q-FFL): the plan adds one, the next free id."""

    server_based: ClassVar[bool] = True


class RunReport:
    """summary.json keys that need every client's contribution at once (rho of a matrix whose
    rows live on different nodes, per-task results): each node's `node_report` travels to the
    launcher, which calls `run_keys` with all of them."""

    @abstractmethod
    def node_report(self) -> dict[str, Any]:
        """What this node tells the launcher at the end (not averaged over nodes)."""

    @classmethod
    @abstractmethod
    def run_keys(cls, plan: RunPlan, reports: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
        """The summary.json keys computed from every node's `node_report`."""
