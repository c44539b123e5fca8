"""Seeded topology generators; each records how it made its graph in `Topology.generator`.

Metadata is `{name, params[, seed, draw_seed, draws, repair, ...]}`: `params` are the arguments
other than `seed`, so `GENERATORS[name](**params, seed=seed)` rebuilds the same graph.

Random generators run one loop (`_sample`): a numpy Generator seeded with `seed` yields a
`draw_seed` per draw; the draw uses networkx with that seed (or, for geometric graphs, numpy
positions from it), and anything else the draw needs (bridge endpoints) comes from
`default_rng(draw_seed)`, so a single draw is reproducible from `draw_seed` alone. A disconnected
draw is repaired as the caller chooses:

- `bridge` (docs/protocols/ssd-fl.md#e6): keep the draw; order its components by smallest node
  id and join each consecutive pair with one edge between uniformly drawn members, i.e.
  components - 1 added edges, listed in `repair.added_edges`;
- `resample`: reject it and draw again (`repair.disconnected_draws` counts those rejected).

Given `edges` and/or `diameter`, draws are also rejection-sampled until the (repaired) graph has
exactly that many edges and that diameter, so a paper's realised (|E|, diam) can be pinned.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np
from networkx.utils import UnionFind

from topologies.errors import TopologyError
from topologies.model import Topology, TopologyEdge, TopologyNode
from topologies.schedules import GraphSchedule, RoundGraphs

REPAIRS = ("bridge", "resample")
DEFAULT_MAX_TRIES = 100_000

# A draw: (draw_seed, numpy Generator seeded with it) -> (graph, extra metadata).
Draw = Callable[[int, np.random.Generator], tuple[nx.Graph, dict[str, Any]]]


def _require(ok: bool, kind: str, message: str) -> None:
    if not ok:
        raise TopologyError(f"{kind}: {message}")


def _params(**params: Any) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def _topology(graph: nx.Graph, meta: dict[str, Any]) -> Topology:
    nodes = []
    for v in sorted(graph):
        pos = graph.nodes[v].get("pos")
        nodes.append(TopologyNode(int(v), position=None if pos is None else tuple(map(float, pos))))
    edges = tuple(TopologyEdge(int(u), int(v)) for u, v in graph.edges)
    return Topology(tuple(nodes), edges, generator=meta, name=meta["name"])


def _fixed(kind: str, graph: nx.Graph, **params: Any) -> Topology:
    return _topology(graph, {"name": kind, "params": params})


def ring(n: int) -> Topology:
    """Cycle 0-1-...-(n-1)-0: n edges, diameter n // 2."""
    _require(n >= 3, "ring", f"n must be at least 3, got {n}")
    return _fixed("ring", nx.cycle_graph(n), n=n)


def line(n: int) -> Topology:
    """Path 0-1-...-(n-1): n - 1 edges, diameter n - 1."""
    _require(n >= 1, "line", f"n must be at least 1, got {n}")
    return _fixed("line", nx.path_graph(n), n=n)


def star(n: int) -> Topology:
    """Hub 0 linked to nodes 1..n-1 (a server-like node for star baselines)."""
    _require(n >= 2, "star", f"n must be at least 2, got {n}")
    return _fixed("star", nx.star_graph(n - 1), n=n)


def complete(n: int) -> Topology:
    """Every pair linked: n (n - 1) / 2 edges."""
    _require(n >= 1, "complete", f"n must be at least 1, got {n}")
    return _fixed("complete", nx.complete_graph(n), n=n)


def _lattice(kind: str, rows: int, cols: int, periodic: bool) -> Topology:
    g = nx.grid_2d_graph(rows, cols, periodic=periodic)
    g = nx.relabel_nodes(g, {(r, c): r * cols + c for r, c in g})
    return _fixed(kind, g, rows=rows, cols=cols)


def grid(rows: int, cols: int) -> Topology:
    """rows x cols lattice, node r * cols + c: rows (cols - 1) + cols (rows - 1) edges."""
    _require(rows >= 1 and cols >= 1, "grid", f"rows and cols must be >= 1, got {rows}x{cols}")
    return _lattice("grid", rows, cols, periodic=False)


def torus(rows: int, cols: int) -> Topology:
    """Grid with wrap-around links: 2 rows cols edges (needs rows, cols >= 3 to stay simple)."""
    _require(rows >= 3 and cols >= 3, "torus", f"rows and cols must be >= 3, got {rows}x{cols}")
    return _lattice("torus", rows, cols, periodic=True)


def _bridge(graph: nx.Graph, rng: np.random.Generator) -> list[list[int]]:
    """Join consecutive components (ordered by smallest id) by one random edge each."""
    components = sorted((sorted(c) for c in nx.connected_components(graph)), key=lambda c: c[0])
    added = []
    for a, b in itertools.pairwise(components):
        u, v = int(a[rng.integers(len(a))]), int(b[rng.integers(len(b))])
        graph.add_edge(u, v)
        added.append(sorted((u, v)))
    return added


def _sample(
    kind: str,
    params: dict[str, Any],
    seed: int,
    draw: Draw,
    repair: str | None,
    max_tries: int,
) -> Topology:
    """Draw until a connected graph (bridged if `repair == "bridge"`) meets the targets.

    `repair=None` is for generators whose draws are always connected.
    """
    _require(
        repair is None or repair in REPAIRS,
        kind,
        f"repair must be bridge or resample, got {repair!r}",
    )
    _require(max_tries >= 1, kind, f"max_tries must be >= 1, got {max_tries}")
    edges, diameter = params.get("edges"), params.get("diameter")
    rng = np.random.default_rng(seed)
    disconnected = 0
    for attempt in range(1, max_tries + 1):
        draw_seed = int(rng.integers(2**32))
        draw_rng = np.random.default_rng(draw_seed)
        graph, extra = draw(draw_seed, draw_rng)
        added: list[list[int]] = []
        if not nx.is_connected(graph):
            _require(repair is not None, kind, "draw is disconnected")
            if repair == "resample":
                disconnected += 1
                continue
            added = _bridge(graph, draw_rng)
        if edges is not None and graph.number_of_edges() != edges:
            continue
        if diameter is not None and nx.diameter(graph) != diameter:
            continue
        meta = {"name": kind, "params": params, "seed": seed, "draw_seed": draw_seed}
        meta.update(draws=attempt, **extra)
        if repair == "bridge":
            meta["repair"] = {"method": "bridge", "added_edges": added}
        elif repair == "resample":
            meta["repair"] = {"method": "resample", "disconnected_draws": disconnected}
        return _topology(graph, meta)
    wanted = " and ".join(
        f"{k} {v}" for k, v in (("edges", edges), ("diameter", diameter)) if v is not None
    )
    raise TopologyError(
        f"{kind}: no connected draw{' with ' + wanted if wanted else ''} in {max_tries} draws"
    )


def _check_targets(kind: str, n: int, edges: int | None, diameter: int | None) -> None:
    _require(n >= 1, kind, f"n must be at least 1, got {n}")
    _require(
        edges is None or 0 <= edges <= n * (n - 1) // 2,
        kind,
        f"edges must be in 0..{n * (n - 1) // 2} for n={n}, got {edges}",
    )
    _require(diameter is None or diameter >= 0, kind, f"diameter must be >= 0, got {diameter}")


def erdos_renyi(
    n: int,
    p: float,
    seed: int = 0,
    repair: str = "bridge",
    edges: int | None = None,
    diameter: int | None = None,
    max_tries: int = DEFAULT_MAX_TRIES,
) -> Topology:
    """G(n, p) (`nx.gnp_random_graph`), repaired to connectivity by `bridge` or `resample`."""
    kind = "erdos-renyi"
    _check_targets(kind, n, edges, diameter)
    _require(0.0 <= p <= 1.0, kind, f"p must be in [0, 1], got {p}")
    params = _params(n=n, p=p, repair=repair, edges=edges, diameter=diameter)

    def draw(draw_seed: int, _: np.random.Generator) -> tuple[nx.Graph, dict[str, Any]]:
        return nx.gnp_random_graph(n, p, seed=draw_seed), {}

    return _sample(kind, params, seed, draw, repair, max_tries)


def _grown_radius(start: float, step: float, needed: float) -> float:
    """The first radius on the grid start + k * step (k >= 0) that reaches `needed`
    (docs/protocols/dsc.md#a10)."""
    k = max(0, math.ceil((needed - start) / step - 1e-9))
    while round(start + k * step, 12) < needed:
        k += 1
    return round(start + k * step, 12)


def _connecting_radius(dist: np.ndarray) -> float:
    """Longest edge of the Euclidean minimum spanning tree: the smallest connecting radius."""
    n = len(dist)
    iu, ju = np.triu_indices(n, 1)
    components = UnionFind(range(n))
    merged = 1
    for k in np.argsort(dist[iu, ju], kind="stable"):
        a, b = int(iu[k]), int(ju[k])
        if components[a] != components[b]:
            components.union(a, b)
            merged += 1
            if merged == n:
                return float(dist[a, b])
    return 0.0


def random_geometric(
    n: int,
    radius: float,
    seed: int = 0,
    grow: bool = False,
    grow_step: float = 0.01,
    dim: int = 2,
    side: float = 1.0,
    repair: str = "bridge",
    edges: int | None = None,
    diameter: int | None = None,
    max_tries: int = DEFAULT_MAX_TRIES,
) -> Topology:
    """Points uniform in [0, side]^dim, linked when their distance is <= radius.

    Positions are saved in the nodes. With `grow`, `radius` is a start that grows by `grow_step`
    until the draw is connected (docs/protocols/dsc.md#a10), and the radius used is recorded as
    `grown_radius`; otherwise a disconnected draw is repaired as `repair` says.
    """
    kind = "random-geometric"
    _check_targets(kind, n, edges, diameter)
    _require(radius >= 0, kind, f"radius must be >= 0, got {radius}")
    _require(grow_step > 0, kind, f"grow_step must be > 0, got {grow_step}")
    _require(dim in (2, 3), kind, f"dim must be 2 or 3, got {dim}")
    _require(side > 0, kind, f"side must be > 0, got {side}")
    params = _params(
        n=n,
        radius=radius,
        grow=grow,
        grow_step=grow_step if grow else None,
        dim=dim,
        side=side,
        repair=None if grow else repair,
        edges=edges,
        diameter=diameter,
    )

    def draw(_: int, rng: np.random.Generator) -> tuple[nx.Graph, dict[str, Any]]:
        pos = rng.random((n, dim)) * side
        dist = np.sqrt(((pos[:, None, :] - pos[None, :, :]) ** 2).sum(axis=-1))
        r = _grown_radius(radius, grow_step, _connecting_radius(dist)) if grow else radius
        g: nx.Graph[int] = nx.Graph()
        g.add_nodes_from((i, {"pos": pos[i].tolist()}) for i in range(n))
        iu, ju = np.triu_indices(n, 1)
        close = dist[iu, ju] <= r
        g.add_edges_from(zip(iu[close].tolist(), ju[close].tolist(), strict=True))
        return g, ({"grown_radius": r} if grow else {})

    return _sample(kind, params, seed, draw, None if grow else repair, max_tries)


def barabasi_albert(
    n: int,
    m: int,
    seed: int = 0,
    edges: int | None = None,
    diameter: int | None = None,
    max_tries: int = DEFAULT_MAX_TRIES,
) -> Topology:
    """Preferential attachment, m links per new node (m = 1 gives a tree); always connected."""
    kind = "barabasi-albert"
    _check_targets(kind, n, edges, diameter)
    _require(1 <= m < n, kind, f"m must be in 1..n-1, got m={m} for n={n}")
    params = _params(n=n, m=m, edges=edges, diameter=diameter)

    def draw(draw_seed: int, _: np.random.Generator) -> tuple[nx.Graph, dict[str, Any]]:
        return nx.barabasi_albert_graph(n, m, seed=draw_seed), {}

    return _sample(kind, params, seed, draw, None, max_tries)


def watts_strogatz(
    n: int,
    k: int,
    p: float,
    seed: int = 0,
    repair: str = "bridge",
    edges: int | None = None,
    diameter: int | None = None,
    max_tries: int = DEFAULT_MAX_TRIES,
) -> Topology:
    """Small world: ring lattice with k // 2 neighbours per side (networkx rounds an odd k down,
    so SSD-FL's literal k = 3 is a ring), each edge rewired with probability p."""
    kind = "watts-strogatz"
    _check_targets(kind, n, edges, diameter)
    _require(2 <= k < n, kind, f"k must be in 2..n-1, got k={k} for n={n}")
    _require(0.0 <= p <= 1.0, kind, f"p must be in [0, 1], got {p}")
    params = _params(n=n, k=k, p=p, repair=repair, edges=edges, diameter=diameter)

    def draw(draw_seed: int, _: np.random.Generator) -> tuple[nx.Graph, dict[str, Any]]:
        return nx.watts_strogatz_graph(n, k, p, seed=draw_seed), {}

    return _sample(kind, params, seed, draw, repair, max_tries)


def one_peer_exponential(n: int) -> Topology:
    """Ying et al. 2021's time-varying directed graph: in round r node i sends to node
    i + 2^(r mod ceil(log2 n)) mod n alone (topologies/schedules.py); its edges are the union,
    n ceil(log2 n) arcs."""
    _require(n >= 2, "one-peer-exponential", f"n must be at least 2, got {n}")
    schedule = GraphSchedule("one-peer-exponential")
    arcs = RoundGraphs.of(range(n), (), directed=True, schedule=schedule).union()
    return Topology(nodes=tuple(TopologyNode(i) for i in range(n)),
                    edges=tuple(TopologyEdge(u, v, directed=True) for u, v in arcs),
                    generator={"name": "one-peer-exponential", "params": {"n": n}},
                    directed=True, schedule=schedule)


GENERATORS: dict[str, Callable[..., Topology]] = {
    "ring": ring,
    "line": line,
    "star": star,
    "complete": complete,
    "grid": grid,
    "torus": torus,
    "erdos-renyi": erdos_renyi,
    "random-geometric": random_geometric,
    "barabasi-albert": barabasi_albert,
    "watts-strogatz": watts_strogatz,
    "one-peer-exponential": one_peer_exponential,
}
ALIASES = {
    "er": "erdos-renyi",
    "rgg": "random-geometric",
    "ba": "barabasi-albert",
    "ws": "watts-strogatz",
    "expo": "one-peer-exponential",
}
