"""Which nodes are gone, agreed by every survivor for the same round (`--on-failure continue`).

A node learns that a neighbour died while waiting for it (dfl_node/transports/liveness.py): the
neighbour becomes a *suspect* and this node's waits skip it from then on. In the round where the
death happens the survivors may differ in what they saw (the dead node may have sent its round-r
message to some neighbours and not to others); each neighbour of it uses what arrived and
treats the rest as silence. Before round r+1 every survivor must hold the same graph, so the
runtime ends every round with a flood of the dead set over the control plane:

- step 0 input: the nodes already dropped plus this node's suspects at the start of the flood;
- `steps` exchanges with the current neighbours, each node sending the union it knows;
- suspects that appear *during* the flood are not added to it (they would reach only part of
  the mesh in the steps left): they are the next round's input, and the round between uses them
  as silence, like the round of the death.

Every survivor starts the flood with the news of every detector (its neighbours), so once the
flood has run for the diameter of the graph without the dead node, all survivors hold the same
set. `steps` is that bound for any single loss: the largest diameter of the graph minus one
node, over the nodes whose loss leaves it connected (ring20: 18; a loss that disconnects the
graph ends the run anyway). Two nodes failing within one flood are agreed on as well unless one
of the news' only carriers is among them; that case is not handled (the survivors may then
switch at different rounds). The new graph is used from round r+1; a graph whose survivors are
disconnected stops the run with `GraphDisconnected`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from dfl_node.comm.channel import Comm
from dfl_node.plan import hop_depths
from dfl_node.transports.liveness import LivenessWatch, MeshFailure, arm
from dfl_node.wire.tags import Tag

PHASE = "members"


class GraphDisconnected(MeshFailure):
    """The survivors of a failure no longer form one connected graph (or this node is among
    the dead); `peers` are the dead."""


@dataclass(frozen=True)
class SurvivingGraph:
    """The plan's graph without the dead nodes: what the protocols run on after a failure."""

    ids: tuple[int, ...]
    edges: tuple[tuple[int, int], ...]
    dead: tuple[int, ...] = ()

    @classmethod
    def of(cls, ids: Iterable[int], edges: Iterable[tuple[int, int]],
           dead: Iterable[int] = ()) -> SurvivingGraph:
        gone = set(dead)
        alive = tuple(sorted(i for i in ids if i not in gone))
        kept = sorted((min(u, v), max(u, v)) for u, v in edges if u not in gone and v not in gone)
        return cls(alive, tuple(kept), tuple(sorted(gone)))

    @cached_property
    def adjacency(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {i: [] for i in self.ids}
        for u, v in self.edges:
            out[u].append(v)
            out[v].append(u)
        return {i: sorted(js) for i, js in out.items()}

    def neighbors(self, node: int) -> list[int]:
        return self.adjacency[node]

    def without(self, node: int) -> SurvivingGraph:
        return SurvivingGraph.of(self.ids, self.edges, (*self.dead, node))

    def components(self) -> list[list[int]]:
        """Connected components, largest first."""
        seen: set[int] = set()
        out = []
        for start in self.ids:
            if start not in seen:
                reach = set(self._depths(start))
                seen |= reach
                out.append(sorted(reach))
        return sorted(out, key=lambda c: (-len(c), c))

    def diameter(self) -> int:
        """Longest shortest path in hops (of a connected graph)."""
        return max((max(self._depths(i).values()) for i in self.ids), default=0)

    def flood_steps(self) -> int:
        """Steps of a dead-set flood that reach every survivor of any single further loss."""
        worst = self.diameter()
        for node in self.ids:
            rest = self.without(node)
            if len(rest.components()) == 1:
                worst = max(worst, rest.diameter())
        return max(worst, 1)

    def metropolis_row(self, node: int) -> dict[int, float]:
        """Row `node` of the Metropolis matrix of this graph, self included, sorted by id."""
        degree = {i: len(self.neighbors(i)) for i in self.ids}
        row = {j: 1.0 / (1 + max(degree[node], degree[j])) for j in self.neighbors(node)}
        row[node] = 1.0 - sum(row[j] for j in sorted(row))
        return dict(sorted(row.items()))

    def to_json(self) -> dict[str, Any]:
        return {"dead": list(self.dead), "edges": [list(e) for e in self.edges],
                "nodes": len(self.ids)}

    def _depths(self, source: int) -> dict[int, int]:
        return hop_depths(self.adjacency, source)


class Membership:
    """One node's side of the agreement; `changes` is the run's record of graph changes."""

    def __init__(self, comm: Comm, ids: Sequence[int], edges: Iterable[tuple[int, int]]):
        self.comm = comm
        self.ids = tuple(sorted(ids))
        self.graph = SurvivingGraph.of(self.ids, edges)
        self.steps = self.graph.flood_steps()
        self.changes: list[dict[str, Any]] = []
        comm.set_schema(PHASE, {"dead": ("uint8", (len(self.ids),))})

    def agree(self, r: int) -> SurvivingGraph | None:
        """The end of round r: flood the dead set; the new graph (used from round r+1) if it
        changed, else None."""
        known = set(self.graph.dead) | self.comm.suspects
        for step in range(self.steps):
            theirs = self.comm.exchange(Tag("ctrl", r, PHASE, step=step),
                                        {"dead": self._mask(known)})
            for tensors in theirs.values():
                known |= self._members(tensors["dead"].numpy())
        if known == set(self.graph.dead):
            return None
        if self.comm.node_id in known:
            raise GraphDisconnected(f"node {self.comm.node_id}: the mesh declared this node dead "
                                    f"at round {r}", tuple(known))
        return self._switch(r + 1, known)

    def _switch(self, first_round: int, dead: set[int]) -> SurvivingGraph:
        graph = SurvivingGraph.of(self.ids, self.graph.edges, dead)
        parts = graph.components()
        if len(parts) > 1:
            raise GraphDisconnected(
                f"node {self.comm.node_id}: after node(s) {sorted(dead)} died the surviving graph "
                f"is disconnected from round {first_round}: {len(parts)} components of sizes "
                f"{', '.join(str(len(p)) for p in parts)}", tuple(dead))
        self.comm.drop_neighbors(dead - set(self.graph.dead))
        self.graph = graph
        self.steps = graph.flood_steps()
        self.changes.append({"round": first_round, **graph.to_json()})
        return graph

    def _mask(self, members: set[int]) -> np.ndarray:
        return np.array([i in members for i in self.ids], dtype=np.uint8)

    def _members(self, mask: np.ndarray) -> set[int]:
        return {i for i, bit in zip(self.ids, mask, strict=True) if bit}


class FailureHandling:
    """The runtime's side of failures, around the round loop: liveness armed once the mesh has
    met; with `wire.on_failure: continue`, waits tolerate dead neighbours and every round ends
    with the agreement above."""

    def __init__(self, comm: Comm, watch: LivenessWatch | None, on_failure: str,
                 ids: Sequence[int], edges: Iterable[tuple[int, int]]) -> None:
        self.comm = comm
        self.watch = watch
        arm(comm, watch)
        comm.tolerate_deaths = on_failure == "continue"
        self.members = Membership(comm, ids, edges) if comm.tolerate_deaths else None

    def after_round(self, r: int, on_graph_change: Callable[[SurvivingGraph], None]) -> None:
        graph = self.members.agree(r) if self.members is not None else None
        if graph is not None:
            on_graph_change(graph)

    def report(self) -> dict[str, Any]:
        """Keys of the node's final record (after `comm.close()`): the agreed changes; the
        heartbeats go into the ledger."""
        if self.watch is not None:
            self.comm.ledger.record_heartbeats(self.watch.traffic())
        if self.members is None:
            return {}
        return {"membership": {"dead": list(self.members.graph.dead),
                               "changes": self.members.changes}}
