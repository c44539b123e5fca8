"""Directed and time-varying graphs: the arcs of every round, from the plan alone.

A topology is one graph for the whole run unless it is `directed` (its edges are arcs u -> v,
"u sends to v") or has a `schedule`, which gives each round r its own set of arcs:

| kind                   | round r's arcs                                                 |
|------------------------|----------------------------------------------------------------|
| `cycle`                | `graphs[r mod len(graphs)]`, each an edge list read like edges |
| `one-peer-exponential` | i -> i + 2^(r mod ceil(log2 n)) mod n, by position in id order |
| `random-peers`         | each node draws `peers` of its out-neighbours, afresh per round |

The one-peer exponential graph is Ying et al. 2021 ("Exponential Graph is Provably Efficient
for Decentralized Deep Training"); random-peers is Epidemic Learning's EL-Local sampling.

Why the arcs are computed, never sent: both ends of an arc must know it before the round, a
resumed node included, so every process derives round r's arcs from the topology, r and the
run's seed. The random draw is therefore not numpy's or `random`'s (whose algorithms may change
between versions, and with them a run on another host): a node's candidates are ordered by the
SHA-256 of (seed, round, node, candidate) and the first `peers` taken, a uniformly random subset
that any Python computes alike. Nothing here imports numpy: the plan of every node reads it.

The links a run connects are the union of every arc the schedule can use (`union`): the file's
`edges` are that union (derived when absent, for `cycle` and `one-peer-exponential`) and, for
`random-peers`, the graph the peers are drawn from.

Per-round mixing weights (`weight_row`, D-PSGD's W of round r): Metropolis-Hastings on a
round graph that is undirected (a `cycle` of an undirected topology, or a static undirected
one), else 1 / (1 + d_in(i)) on self and on each in-neighbour: row-stochastic on any directed
graph, and the 1/2, 1/2 of the one-peer exponential graph.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Arc = tuple[int, int]
KINDS = ("cycle", "one-peer-exponential", "random-peers")


@dataclass(frozen=True)
class GraphSchedule:
    """A topology's `schedule` section: its kind and that kind's one parameter."""

    kind: str
    graphs: tuple[tuple[Arc, ...], ...] = ()  # cycle: each graph's edges as written (canonical)
    peers: int = 0  # random-peers: how many out-neighbours each node sends to per round

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.kind == "cycle":
            out["graphs"] = [[list(e) for e in g] for g in self.graphs]
        if self.kind == "random-peers":
            out["peers"] = self.peers
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GraphSchedule:
        graphs = tuple(tuple((int(e[0]), int(e[1])) for e in g) for g in data.get("graphs", ()))
        return cls(str(data["kind"]), graphs, int(data.get("peers", 0)))


def exponential_period(n: int) -> int:
    """tau = ceil(log2 n): the one-peer exponential graph repeats every tau rounds."""
    return max(1, (n - 1).bit_length())


@dataclass(frozen=True)
class RoundGraphs:
    """The arcs of every round of one topology: `arcs(r, seed)` and what derives from them."""

    ids: tuple[int, ...]
    base: tuple[Arc, ...]  # the topology's arcs: both directions of an undirected edge
    directed: bool = False
    schedule: GraphSchedule | None = None
    _cache: dict[tuple[int, int], tuple[Arc, ...]] = field(default_factory=dict, compare=False,
                                                          repr=False)

    @classmethod
    def of(cls, ids: Iterable[int], edges: Iterable[Arc], directed: bool = False,
           schedule: GraphSchedule | None = None) -> RoundGraphs:
        return cls(tuple(sorted(ids)), arcs_of(edges, directed), directed, schedule)

    @classmethod
    def from_topology(cls, topology: Mapping[str, Any]) -> RoundGraphs:
        """From a topology's file form (`Topology.to_dict`, the plan's `topology`)."""
        edges = [(int(e["u"]), int(e["v"])) if isinstance(e, dict) else (int(e[0]), int(e[1]))
                 for e in topology.get("edges") or ()]
        schedule = topology.get("schedule")
        return cls.of((int(n["id"]) for n in topology["nodes"]), edges,
                      bool(topology.get("directed", False)),
                      GraphSchedule.from_dict(schedule) if schedule else None)

    @property
    def symmetric(self) -> bool:
        """Whether every round's graph is undirected (an arc's reverse is an arc too)."""
        kind = self.schedule.kind if self.schedule else None
        return not self.directed and kind in (None, "cycle")

    def arcs(self, r: int, seed: int) -> tuple[Arc, ...]:
        """Round r's arcs, sorted."""
        key = (r, seed)
        if key not in self._cache:
            if len(self._cache) > 8:
                self._cache.clear()
            self._cache[key] = tuple(sorted(self._compute(r, seed)))
        return self._cache[key]

    def _compute(self, r: int, seed: int) -> Iterable[Arc]:
        s = self.schedule
        if s is None:
            return self.base
        if s.kind == "cycle":
            return arcs_of(s.graphs[r % len(s.graphs)], self.directed)
        if s.kind == "one-peer-exponential":
            n = len(self.ids)
            hop = 2 ** (r % exponential_period(n))
            return [(i, self.ids[(a + hop) % n]) for a, i in enumerate(self.ids)]
        if s.kind == "random-peers":
            return [(i, j) for i in self.ids
                    for j in drawn_peers(self.out_of(self.base, i), s.peers, seed, r, i)]
        raise ValueError(f"schedule: unknown kind {s.kind!r} (known: {', '.join(KINDS)})")

    def union(self) -> tuple[Arc, ...]:
        """Every arc some round may use, sorted: the links a run connects."""
        s = self.schedule
        if s is None or s.kind == "random-peers":
            return tuple(sorted(self.base))
        rounds = len(s.graphs) if s.kind == "cycle" else exponential_period(len(self.ids))
        return tuple(sorted({a for r in range(rounds) for a in self._compute(r, 0)}))

    def out_neighbors(self, node: int, r: int, seed: int) -> list[int]:
        """Whom `node` sends to in round r, ascending."""
        return self.out_of(self.arcs(r, seed), node)

    def in_neighbors(self, node: int, r: int, seed: int) -> list[int]:
        """From whom `node` receives in round r, ascending: the order every sum runs in."""
        return sorted(u for u, v in self.arcs(r, seed) if v == node)

    def weight_row(self, node: int, r: int, seed: int) -> dict[int, float]:
        """Row `node` of round r's mixing matrix, self included, in ascending id (see above)."""
        arcs = self.arcs(r, seed)
        into = sorted(u for u, v in arcs if v == node)
        if not self.symmetric:
            share = 1.0 / (1 + len(into))
            return dict(sorted({node: share, **dict.fromkeys(into, share)}.items()))
        degree: dict[int, int] = dict.fromkeys(self.ids, 0)
        for u, _ in arcs:
            degree[u] += 1
        row = {j: 1.0 / (1 + max(degree[node], degree[j])) for j in into}
        row[node] = 1.0 - sum(row[j] for j in sorted(row))
        return dict(sorted(row.items()))

    @staticmethod
    def out_of(arcs: Iterable[Arc], node: int) -> list[int]:
        return sorted(v for u, v in arcs if u == node)


def arcs_of(edges: Iterable[Arc], directed: bool) -> tuple[Arc, ...]:
    """The arcs of an edge list: as written when `directed`, both directions else."""
    out: set[Arc] = set()
    for u, v in edges:
        out.add((u, v))
        if not directed:
            out.add((v, u))
    return tuple(sorted(out))


def drawn_peers(candidates: Sequence[int], peers: int, seed: int, r: int,
                node: int) -> list[int]:
    """`peers` of `candidates` drawn uniformly for `node` in round r, ascending (see above)."""
    def key(j: int) -> bytes:
        return hashlib.sha256(f"{seed}/{r}/{node}/{j}".encode()).digest()
    return sorted(sorted(candidates, key=key)[:peers])


def strongly_connected(ids: Sequence[int], arcs: Iterable[Arc]) -> bool:
    """Whether every node reaches every other along arcs (both walks from the first node)."""
    if not ids:
        return True
    forward: dict[int, list[int]] = {i: [] for i in ids}
    backward: dict[int, list[int]] = {i: [] for i in ids}
    for u, v in arcs:
        forward[u].append(v)
        backward[v].append(u)
    for graph in (forward, backward):
        seen, todo = {ids[0]}, [ids[0]]
        while todo:
            for j in graph[todo.pop()]:
                if j not in seen:
                    seen.add(j)
                    todo.append(j)
        if len(seen) != len(ids):
            return False
    return True
