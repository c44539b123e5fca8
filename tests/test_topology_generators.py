"""Generators: edge counts, determinism, repair metadata that tells the truth, shipped files."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from topologies import generators as gen
from topologies import make_shipped
from topologies.errors import TopologyError
from topologies.model import Topology


@pytest.mark.parametrize(
    ("topology", "edges", "diameter"),
    [
        (gen.ring(20), 20, 10),
        (gen.ring(7), 7, 3),
        (gen.line(6), 5, 5),
        (gen.star(9), 8, 2),
        (gen.complete(10), 45, 1),
        (gen.complete(1), 0, 0),
        (gen.grid(3, 5), 3 * 4 + 5 * 2, 2 + 4),
        (gen.torus(4, 6), 2 * 4 * 6, 2 + 3),
        (gen.barabasi_albert(30, 1, seed=5), 29, None),
        (gen.barabasi_albert(30, 3, seed=5), (30 - 3) * 3, None),
    ],
)
def test_edge_counts_and_diameters(topology: Topology, edges: int, diameter: int | None) -> None:
    assert len(topology.edges) == edges
    if diameter is not None:
        assert topology.diameter() == diameter
    assert topology.ids == tuple(range(len(topology.nodes)))


def test_grid_numbering_is_row_major() -> None:
    g = gen.grid(2, 3)
    assert g.neighbors(4) == [1, 3, 5]
    assert gen.torus(3, 3).neighbors(0) == [1, 2, 3, 6]


def test_star_hub_is_node_0() -> None:
    assert gen.star(5).neighbors(0) == [1, 2, 3, 4]


RANDOM = [
    lambda seed: gen.erdos_renyi(30, 0.1, seed=seed),
    lambda seed: gen.erdos_renyi(15, 0.2, seed=seed, repair="resample"),
    lambda seed: gen.random_geometric(25, 0.2, seed=seed),
    lambda seed: gen.random_geometric(15, 0.05, seed=seed, grow=True),
    lambda seed: gen.barabasi_albert(20, 2, seed=seed),
    lambda seed: gen.watts_strogatz(20, 4, 0.3, seed=seed),
]


@pytest.mark.parametrize("make", RANDOM)
def test_random_generators_are_deterministic_and_seed_dependent(make) -> None:
    assert make(11) == make(11)
    assert make(11).edges != make(12).edges


@pytest.mark.parametrize("make", RANDOM)
def test_metadata_rebuilds_the_same_graph(make) -> None:
    topology = make(3)
    meta = topology.generator
    assert gen.GENERATORS[meta["name"]](**meta["params"], seed=meta["seed"]) == topology


def test_bridge_adds_components_minus_one_edges_to_the_networkx_draw() -> None:
    topology = gen.erdos_renyi(30, 0.1, seed=0, repair="bridge")
    meta = topology.generator
    raw = nx.gnp_random_graph(30, 0.1, seed=meta["draw_seed"])
    components = sorted((sorted(c) for c in nx.connected_components(raw)), key=lambda c: c[0])
    added = meta["repair"]["added_edges"]
    assert meta["repair"]["method"] == "bridge" and meta["draws"] == 1
    assert len(components) > 1 and len(added) == len(components) - 1
    # Edge k joins component k to component k + 1 (components ordered by smallest id).
    for k, (u, v) in enumerate(added):
        assert {u, v} & set(components[k]) and {u, v} & set(components[k + 1])
    expected = {tuple(sorted(e)) for e in raw.edges} | {tuple(e) for e in added}
    assert {e.pair for e in topology.edges} == expected
    assert nx.is_connected(topology.to_networkx())


def test_resample_keeps_a_connected_networkx_draw_unchanged() -> None:
    topology = gen.erdos_renyi(30, 0.1, seed=0, repair="resample")
    meta = topology.generator
    raw = nx.gnp_random_graph(30, 0.1, seed=meta["draw_seed"])
    assert {e.pair for e in topology.edges} == {tuple(sorted(e)) for e in raw.edges}
    assert meta["repair"] == {"method": "resample", "disconnected_draws": meta["draws"] - 1}
    assert meta["draws"] > 1  # G(30, 0.1) is almost always disconnected


def test_rejection_sampling_pins_edges_and_diameter() -> None:
    topology = gen.erdos_renyi(20, 0.5, seed=1, repair="resample", edges=95, diameter=2)
    assert (len(topology.edges), topology.diameter()) == (95, 2)
    topology = gen.random_geometric(20, 0.4, seed=1, repair="resample", edges=60, diameter=4)
    assert (len(topology.edges), topology.diameter()) == (60, 4)


def _distances(topology: Topology) -> np.ndarray:
    pos = np.array([n.position for n in topology.nodes])
    return np.sqrt(((pos[:, None, :] - pos[None, :, :]) ** 2).sum(axis=-1))


def test_random_geometric_links_exactly_the_close_pairs() -> None:
    topology = gen.random_geometric(30, 0.9, seed=2, repair="resample", side=2.0, dim=3)
    dist, adj = _distances(topology), topology.adjacency()
    off = ~np.eye(30, dtype=bool)
    assert np.all((dist <= 0.9)[off] == (adj == 1)[off])
    assert all(len(n.position) == 3 and max(n.position) <= 2.0 for n in topology.nodes)


def test_grown_radius_is_the_first_connecting_step() -> None:
    topology = gen.random_geometric(15, 0.05, seed=7, grow=True)
    r = topology.generator["grown_radius"]
    assert math.isclose((r - 0.05) / 0.01, round((r - 0.05) / 0.01), abs_tol=1e-6)
    dist = _distances(topology)
    np.testing.assert_array_equal(topology.adjacency() == 1, (dist <= r) & ~np.eye(15, dtype=bool))
    smaller = nx.from_numpy_array((dist <= r - 0.01) & ~np.eye(15, dtype=bool))
    assert nx.is_connected(topology.to_networkx()) and not nx.is_connected(smaller)


def test_watts_strogatz_keeps_n_k_over_2_edges_plus_bridges() -> None:
    # SSD-FL's literal k = 3: networkx uses k // 2 = 1 neighbour a side, i.e. a rewired ring.
    topology = gen.watts_strogatz(30, 3, 0.2, seed=0)
    added = topology.generator["repair"]["added_edges"]
    assert len(topology.edges) == 30 + len(added)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: gen.ring(2), "ring: n must be at least 3, got 2"),
        (lambda: gen.torus(2, 5), "torus: rows and cols must be >= 3, got 2x5"),
        (lambda: gen.erdos_renyi(5, 1.5), "erdos-renyi: p must be in [0, 1], got 1.5"),
        (lambda: gen.erdos_renyi(5, 0.5, repair="glue"), "repair must be bridge or resample"),
        (lambda: gen.erdos_renyi(5, 0.5, edges=11), "edges must be in 0..10 for n=5, got 11"),
        (lambda: gen.barabasi_albert(5, 5), "m must be in 1..n-1, got m=5 for n=5"),
        (lambda: gen.watts_strogatz(5, 1, 0.1), "k must be in 2..n-1, got k=1 for n=5"),
        (lambda: gen.random_geometric(5, 0.2, dim=4), "dim must be 2 or 3, got 4"),
        (
            lambda: gen.erdos_renyi(8, 0.5, edges=3, diameter=2, max_tries=50),
            "erdos-renyi: no connected draw with edges 3 and diameter 2 in 50 draws",
        ),
    ],
)
def test_bad_parameters(make, message: str) -> None:
    with pytest.raises(TopologyError) as info:
        make()
    assert message in str(info.value)


@pytest.mark.parametrize("name", make_shipped.SHIPPED)
def test_shipped_file_matches_its_recipe(name: str) -> None:
    """The committed file is exactly what `python -m topologies.make_shipped` writes."""
    assert make_shipped.path_of(name).read_text(encoding="utf-8") == make_shipped.render(name)


def test_shipped_graphs_have_the_papers_numbers() -> None:
    from topologies.loader import load_topology

    shipped = {name: load_topology(make_shipped.path_of(name)) for name in make_shipped.SHIPPED}
    numbers = {n: (len(t.nodes), len(t.edges), t.diameter()) for n, t in shipped.items()}
    assert numbers["ring20"] == (20, 20, 10)
    assert numbers["er20-p05"] == (20, 95, 2)
    assert numbers["rgg20-r04"] == (20, 60, 4)
    assert numbers["complete10"] == (10, 45, 1)
    assert numbers["er30"][0] == 30 and shipped["er30"].generator["repair"]["method"] == "bridge"
    assert all(n.position is not None for n in shipped["rgg10"].nodes)
    assert shipped["rgg10"].generator["params"]["grow"] is True
