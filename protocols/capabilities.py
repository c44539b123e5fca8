"""What a protocol may do beyond running rounds: parts of its declaration
(protocols/declaration.py).

A protocol has a capability when its spec lists it (`capabilities=(SurvivesFailures(), ...)`),
and only then: the launcher refuses `--on-failure continue` for a protocol without
`SurvivesFailures`, plans a coordinator only for `PrePhase` and an aggregator only for
`ServerBased`, and the runtime calls a node's capability methods only where they are declared.

A capability is declared once, in the spec, with its launcher-side half where it has one (a
pre-phase's `coordinate`, a run report's `run_keys`); the node's half is methods of the node
class, named in `duties`. The registry refuses a node class that lacks a duty of its spec
(`protocols.registry.node_class`), so a forgotten one fails when the class is looked up, not
when a node first needs it. Nothing here imports torch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from dfl_node.plan import RunPlan

if TYPE_CHECKING:  # the node's side (numpy, zmq): not imported by the launcher's checks
    import numpy as np

    from dfl_node.runner.coordination import Coordination
    from protocols.hyper import ProtocolHyper
    from protocols.robust.aggregation_settings import AggregationRule


class Capability:
    """One thing a protocol may do beyond rounds. `duties`: the methods its node class must
    have for it."""

    duties: ClassVar[tuple[str, ...]] = ()


class PrePhase(Capability, ABC):
    """A one-time pre-phase before round 0: every node reports to a coordinator, which answers
    each (dfl_node/runner/prephase_client.py; SSD-FL's clustering). The node's half:
    `prephase_report()`, what it tells the coordinator (named arrays), and
    `prephase_answer(answer)`, which takes the answer or raises ValueError if it is
    malformed."""

    duties = ("prephase_report", "prephase_answer")

    @abstractmethod
    def coordinate(self, plan: RunPlan,
                   reports: Mapping[int, Mapping[str, np.ndarray]]) -> Coordination:
        """The coordinator's side: every node's report in, an answer per node out (runs once,
        in the coordinator process). Raise ValueError (one line) on reports it cannot use."""


@dataclass(frozen=True)
class SurvivesFailures(Capability):
    """Documented rules for losing a node (docs/failures.md): a run may use
    `--on-failure continue`, and the runtime calls the node's `on_graph_change(graph)` once
    the survivors agree on a smaller graph (from the next round on, it runs on `graph`)."""

    duties = ("on_graph_change",)


@dataclass(frozen=True)
class DynamicGraphs(Capability):
    """Runs on directed and time-varying topologies (topologies/schedules.py): the protocol
    sends to the round's out-neighbours, gathers from its in-neighbours (the runtime sets both
    on the comm before each round) and reads any mixing weights per round
    (`plan.weight_row(node, r)`); the launcher refuses such a topology to any other protocol."""


@dataclass(frozen=True)
class RobustAggregation(Capability):
    """Mixes its neighbourhood with a rule the run chooses (protocols/robust/
    aggregation_settings.py): its `Hyper` has the field `aggregation` (`Aggregation`, default
    the plain mean) and its round mixes with `protocols.sdk.robust_mix`. The launcher refuses
    `aggregation` to any other protocol, and a rule whose parameters the plan's smallest
    in-degree cannot honour (`check_plan`): Push-Sum's rows, which do not sum to one, would
    break under a robust rule, so such protocols do not declare it."""

    key: ClassVar[str] = "aggregation"

    def check_plan(self, plan: RunPlan, hyper: ProtocolHyper) -> None:
        """ValueError (one line) if the rule of `hyper` (the protocol's settings) cannot run at
        the node with the fewest in-neighbours of any round."""
        rule: AggregationRule = getattr(hyper, self.key)
        try:  # every rule's need is a least in-degree: one that runs alone runs anywhere,
            rule.check_in_degree(0)  # and the graph's rounds need not be walked (the mean)
            return
        except ValueError:
            pass
        node, where, fewest = fewest_in_neighbours(plan)
        try:
            rule.check_in_degree(fewest)
        except ValueError as exc:
            raise ValueError(f"hyper.{self.key}: node {node} has the fewest in-neighbours, "
                             f"{fewest}{where}: {exc}") from None


def fewest_in_neighbours(plan: RunPlan) -> tuple[int, str, int]:
    """The client with the fewest in-neighbours, where (" in round r" on a directed or
    time-varying graph, else "") and how many: what every robust rule's needs are checked
    against. Each round's arcs are counted once (200 nodes over 1,000 rounds of the one-peer
    exponential graph: a node's `in_neighbors` in turn took 4.6 s)."""
    graphs = plan.round_graphs
    if graphs is None:
        adjacency = plan.adjacency()
        node = min(plan.clients, key=lambda i: (len(adjacency[i]), i))
        return node, "", len(adjacency[node])
    fewest: tuple[int, int, int] | None = None  # (in-degree, round, node)
    for r in range(plan.rounds):
        degree = Counter(v for _, v in graphs.arcs(r, plan.seed))
        node = min(plan.clients, key=lambda i: (degree[i], i))
        if fewest is None or degree[node] < fewest[0]:
            fewest = (degree[node], r, node)
    if fewest is None:
        raise ValueError("a run of no rounds has no neighbourhood to check")
    degree_, r, node = fewest
    return node, f" in round {r}", degree_


@dataclass(frozen=True)
class ServerBased(Capability):
    """An aggregator node beside the clients (q-FFL): the plan adds one, the next free id."""


class RunReport(Capability, ABC):
    """summary.json keys that need every client's contribution at once (rho of a matrix whose
    rows live on different nodes, per-task results): each node's `node_report()` (what it
    tells the launcher at the end, not averaged over nodes) travels to the launcher, which
    calls `run_keys` with all of them."""

    duties = ("node_report",)

    @abstractmethod
    def run_keys(self, plan: RunPlan, reports: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
        """The summary.json keys computed from every node's `node_report`."""
