"""The in-memory topology: immutable node and edge specs and the graph views built on them.

A `Topology` is what the loader returns and the generators build. It is kept canonical (nodes in
id order, every edge stored as (min, max) in sorted order) so that two equal graphs compare equal
and `to_dict()` is a stable form to hash into a run plan. Node ids are non-negative integers that
need not be contiguous; every matrix is indexed in sorted-id order, so row `index(i)` is node `i`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from topologies.errors import TopologyError
from topologies.schedules import GraphSchedule, RoundGraphs

if TYPE_CHECKING:  # imported where used: reading a file needs neither (see loader.py)
    import networkx as nx
    import numpy as np

# A node that fixes a port but no host listens on the loopback interface.
DEFAULT_HOST = "127.0.0.1"


@dataclass(frozen=True)
class TopologyNode:
    """One node: where it runs (all optional) and free attributes such as `optimizer` or `tasks`."""

    id: int
    host: str | None = None
    port: int | None = None
    device: str | None = None
    position: tuple[float, ...] | None = None
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def address(self) -> tuple[str, int] | None:
        """(host, port) when the topology fixes a port; the host defaults to loopback."""
        if self.port is None:
            return None
        return (self.host or DEFAULT_HOST, self.port)

    def to_dict(self) -> dict[str, Any]:
        """The file form: `id`, the set optional fields, then the free attributes, flat."""
        out: dict[str, Any] = {"id": self.id}
        for key in ("host", "port", "device"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.position is not None:
            out["position"] = list(self.position)
        out.update(self.attrs)
        return out


@dataclass(frozen=True)
class TopologyEdge:
    """One undirected edge, stored with u < v, and its link attributes (weight, latency_ms, ...);
    in a directed topology an arc u -> v ("u sends to v"), stored as written."""

    u: int
    v: int
    attrs: dict[str, Any] = field(default_factory=dict)
    directed: bool = False

    def __post_init__(self) -> None:
        if self.u > self.v and not self.directed:
            u, v = self.v, self.u
            object.__setattr__(self, "u", u)
            object.__setattr__(self, "v", v)

    @property
    def pair(self) -> tuple[int, int]:
        return (self.u, self.v)

    def to_dict(self) -> list[int] | dict[str, Any]:
        """The file form: a bare `[u, v]` pair when the edge has no attributes."""
        if not self.attrs:
            return [self.u, self.v]
        return {"u": self.u, "v": self.v, **self.attrs}


@dataclass(frozen=True)
class Topology:
    """A graph of nodes with optional generator metadata (how it was made).

    Undirected and the same in every round unless `directed` (the edges are arcs) or given a
    `schedule` (each round its own arcs, topologies/schedules.py); then `edges` are the union
    of every arc a round may use, and the neighbour and matrix views below are of that union,
    read as an undirected graph (the links a run connects)."""

    nodes: tuple[TopologyNode, ...]
    edges: tuple[TopologyEdge, ...]
    generator: dict[str, Any] | None = None
    name: str = "topology"
    directed: bool = False
    schedule: GraphSchedule | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(sorted(self.nodes, key=lambda n: n.id)))
        object.__setattr__(self, "edges", tuple(sorted(self.edges, key=lambda e: e.pair)))

    @cached_property
    def ids(self) -> tuple[int, ...]:
        """Node ids in sorted order: the row order of every matrix."""
        return tuple(n.id for n in self.nodes)

    @cached_property
    def _index(self) -> dict[int, int]:
        return {node_id: i for i, node_id in enumerate(self.ids)}

    @cached_property
    def _neighbors(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {node_id: [] for node_id in self.ids}
        for e in self.edges:
            out[e.u].append(e.v)
            out[e.v].append(e.u)
        return {node_id: sorted(nbrs) for node_id, nbrs in out.items()}

    @cached_property
    def _edges_by_pair(self) -> dict[tuple[int, int], TopologyEdge]:
        return {(min(e.pair), max(e.pair)): e for e in self.edges}

    @property
    def dynamic(self) -> bool:
        """Whether a round's arcs are not simply both directions of every edge."""
        return self.directed or self.schedule is not None

    def round_graphs(self) -> RoundGraphs:
        """The arcs of every round (topologies/schedules.py)."""
        return RoundGraphs.of(self.ids, (e.pair for e in self.edges), self.directed,
                              self.schedule)

    def index(self, node_id: int) -> int:
        """Row/column of `node_id` in every matrix of this topology."""
        try:
            return self._index[node_id]
        except KeyError:
            raise TopologyError(f"{self.name}: node {node_id} is not in the topology") from None

    def node(self, node_id: int) -> TopologyNode:
        return self.nodes[self.index(node_id)]

    def neighbors(self, node_id: int) -> list[int]:
        """Sorted neighbour ids: the order in which every neighbour sum runs."""
        self.index(node_id)
        return list(self._neighbors[node_id])

    def edge(self, u: int, v: int) -> TopologyEdge:
        """The edge between u and v, in either order."""
        try:
            return self._edges_by_pair[(min(u, v), max(u, v))]
        except KeyError:
            raise TopologyError(f"{self.name}: no edge between {u} and {v}") from None

    def to_networkx(self) -> nx.Graph:
        """A networkx graph with node fields (position as `pos`) and edge attributes."""
        import networkx as nx

        g: nx.Graph[int] = nx.Graph(name=self.name)
        for n in self.nodes:
            fields = {"host": n.host, "port": n.port, "device": n.device, "pos": n.position}
            g.add_node(n.id, **{k: v for k, v in fields.items() if v is not None}, **n.attrs)
        g.add_edges_from((e.u, e.v, dict(e.attrs)) for e in self.edges)
        return g

    def adjacency(self, weighted: bool = False) -> np.ndarray:
        """Dense symmetric float64 adjacency in sorted-id order.

        Entries are 1 on edges, or each edge's `weight` attribute (default 1) when `weighted`.
        """
        import numpy as np

        a = np.zeros((len(self.nodes), len(self.nodes)))
        for e in self.edges:
            w = float(e.attrs.get("weight", 1.0)) if weighted else 1.0
            i, j = self._index[e.u], self._index[e.v]
            a[i, j] = a[j, i] = w
        return a

    def diameter(self) -> int:
        """Longest shortest path in hops; a connected graph is required."""
        import networkx as nx

        g = self.to_networkx()
        if not nx.is_connected(g):
            raise TopologyError(f"{self.name}: graph is disconnected, its diameter is undefined")
        return int(nx.diameter(g))

    def to_dict(self) -> dict[str, Any]:
        """The canonical file form; `parse_topology(t.to_dict(), src) == t`."""
        out: dict[str, Any] = {"name": self.name}
        if self.generator is not None:
            out["generator"] = self.generator
        if self.directed:
            out["directed"] = True
        if self.schedule is not None:
            out["schedule"] = self.schedule.to_dict()
        out["nodes"] = [n.to_dict() for n in self.nodes]
        out["edges"] = [e.to_dict() for e in self.edges]
        return out
