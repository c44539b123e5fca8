"""Mixing weights: the properties each scheme promises, checked against dense numpy."""

from __future__ import annotations

import numpy as np
import pytest

from topologies import generators as gen
from topologies import measures, mixing
from topologies.errors import TopologyError
from topologies.loader import load_topology, resolve_topology_path
from topologies.model import Topology, TopologyEdge, TopologyNode


def reference_slem(w: np.ndarray) -> float:
    """max(|lambda_2|, |lambda_n|) from a dense symmetric eigendecomposition."""
    eig = np.linalg.eigvalsh(w)  # ascending; eig[-1] == 1 for a stochastic W
    return float(max(abs(eig[0]), abs(eig[-2])))


GRAPHS = {
    "ring20": lambda: load_topology(resolve_topology_path("ring20")).adjacency(),
    "er30": lambda: load_topology(resolve_topology_path("er30")).adjacency(),
    "rgg20-r04": lambda: load_topology(resolve_topology_path("rgg20-r04")).adjacency(),
    "star12": lambda: gen.star(12).adjacency(),
    "ba25": lambda: gen.barabasi_albert(25, 2, seed=1).adjacency(),
    "ws24": lambda: gen.watts_strogatz(24, 4, 0.3, seed=1).adjacency(),
    "torus4x5": lambda: gen.torus(4, 5).adjacency(),
    "complete6": lambda: gen.complete(6).adjacency(),
}


def check_doubly_stochastic(w: np.ndarray, adj: np.ndarray) -> None:
    assert w.dtype == np.float64
    np.testing.assert_array_equal(w, w.T)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    off_graph = (adj == 0) & ~np.eye(len(adj), dtype=bool)
    assert np.all(w[off_graph] == 0)
    assert np.all(w[adj != 0] > 0)
    assert np.all(np.diag(w) >= 0)


@pytest.mark.parametrize("graph", GRAPHS)
def test_metropolis_is_symmetric_doubly_stochastic_on_the_graph(graph: str) -> None:
    adj = GRAPHS[graph]()
    w = mixing.metropolis(adj)
    check_doubly_stochastic(w, adj)
    degree = adj.sum(axis=1)
    i, j = np.argwhere(adj)[0]
    assert w[i, j] == 1.0 / (1.0 + max(degree[i], degree[j]))
    assert measures.slem(w) == pytest.approx(reference_slem(w), abs=1e-12)
    assert measures.spectral_gap(w) == pytest.approx(1.0 - reference_slem(w), abs=1e-12)
    assert measures.slem(w) < 1.0  # connected


@pytest.mark.parametrize("graph", GRAPHS)
def test_max_degree_is_symmetric_doubly_stochastic(graph: str) -> None:
    adj = GRAPHS[graph]()
    w = mixing.max_degree(adj)
    check_doubly_stochastic(w, adj)
    assert np.all(w[adj != 0] == 1.0 / (1.0 + adj.sum(axis=1).max()))
    assert measures.slem(w) == pytest.approx(reference_slem(w), abs=1e-12)


def test_metropolis_on_a_ring_is_one_third_everywhere() -> None:
    w = mixing.metropolis(gen.ring(20).adjacency())
    assert np.allclose(w[w != 0], 1 / 3, atol=1e-15)
    expected = max(abs((1 + 2 * np.cos(2 * np.pi * k / 20)) / 3) for k in range(1, 20))
    assert measures.slem(w) == pytest.approx(expected, abs=1e-12)


def cluster_with_isolated_member() -> tuple[np.ndarray, list[int], int]:
    """er30 with a cluster that holds a node none of whose neighbours is in the cluster."""
    adj = load_topology(resolve_topology_path("er30")).adjacency()
    lonely = int(np.argmin(adj.sum(axis=1)))
    others = [i for i in range(30) if i != lonely and adj[lonely, i] == 0][:9]
    return adj, sorted([lonely, *others]), lonely


def test_cluster_metropolis_gives_an_isolated_member_weight_one() -> None:
    adj, cluster, lonely = cluster_with_isolated_member()
    sub = mixing.induced(adj, cluster)
    np.testing.assert_array_equal(sub, adj[np.ix_(cluster, cluster)])
    w = mixing.metropolis(sub)
    check_doubly_stochastic(w, sub)
    k = cluster.index(lonely)
    np.testing.assert_array_equal(w[k], np.eye(len(cluster))[k])
    # In-cluster degrees, not global ones, set the weights.
    i, j = np.argwhere(sub)[0]
    assert w[i, j] == 1.0 / (1.0 + max(sub[i].sum(), sub[j].sum()))
    assert measures.slem(w) == pytest.approx(reference_slem(w), abs=1e-12)
    assert measures.slem(w) == pytest.approx(1.0, abs=1e-12)  # the cluster is disconnected


def test_cluster_matrix_is_block_diagonal_metropolis() -> None:
    adj, cluster, _ = cluster_with_isolated_member()
    rest = [i for i in range(30) if i not in cluster]
    w = mixing.cluster_matrix(adj, [cluster, rest])
    within = adj.copy()
    within[np.ix_(cluster, rest)] = within[np.ix_(rest, cluster)] = 0
    check_doubly_stochastic(w, within)  # links between clusters carry no weight
    np.testing.assert_array_equal(
        w[np.ix_(rest, rest)], mixing.metropolis(mixing.induced(adj, rest))
    )
    with pytest.raises(ValueError, match="partition"):
        mixing.cluster_matrix(adj, [cluster, rest[:-1]])


def test_unit_is_the_adjacency_and_not_stochastic() -> None:
    adj = gen.star(5).adjacency()
    a = mixing.unit(adj)
    np.testing.assert_array_equal(a, adj)
    assert a.sum(axis=1).tolist() == [4, 1, 1, 1, 1]


def test_lazy_halves_towards_identity_and_keeps_stochasticity() -> None:
    adj = gen.ring(6).adjacency()  # bipartite: plain Metropolis has eigenvalue -1/3
    w = mixing.metropolis(adj)
    lazy = mixing.lazy(w)
    np.testing.assert_array_equal(lazy, (np.eye(6) + w) / 2)
    check_doubly_stochastic(lazy, adj)
    assert np.linalg.eigvalsh(lazy).min() >= -1e-15


def test_mixing_matrix_by_name() -> None:
    topology = Topology(
        (TopologyNode(0), TopologyNode(4), TopologyNode(9)),
        (TopologyEdge(0, 4, {"weight": 2.5}), TopologyEdge(4, 9)),
    )
    adj = topology.adjacency()
    np.testing.assert_array_equal(mixing.mixing_matrix(topology), mixing.metropolis(adj))
    np.testing.assert_array_equal(
        mixing.mixing_matrix(topology, "lazy-max-degree"), mixing.lazy(mixing.max_degree(adj))
    )
    np.testing.assert_array_equal(
        mixing.mixing_matrix(topology, "weighted"), [[0, 2.5, 0], [2.5, 0, 1], [0, 1, 0]]
    )
    assert set(mixing.WEIGHTS) == {"metropolis", "max-degree", "unit"}
    for bad in ("lazy-unit", "uniform"):
        with pytest.raises(TopologyError, match=f"mixing: unknown scheme '{bad}'"):
            mixing.mixing_matrix(topology, bad)


def test_slem_of_a_non_symmetric_matrix_uses_the_general_eigensolver() -> None:
    w = np.array([[0.5, 0.2], [0.5, 0.8]])  # column-stochastic, eigenvalues 1 and 0.3
    assert measures.slem(w) == pytest.approx(0.3, abs=1e-12)
    assert measures.slem(np.ones((1, 1))) == 0.0


def test_algebraic_connectivity_closed_forms() -> None:
    n = 12
    assert measures.algebraic_connectivity(gen.ring(n).adjacency()) == pytest.approx(
        2 - 2 * np.cos(2 * np.pi / n), abs=1e-12
    )
    assert measures.algebraic_connectivity(gen.complete(n).adjacency()) == pytest.approx(n)
    assert measures.algebraic_connectivity(gen.line(n).adjacency()) == pytest.approx(
        2 - 2 * np.cos(np.pi / n), abs=1e-12
    )
    assert measures.algebraic_connectivity(np.zeros((3, 3))) == pytest.approx(0.0, abs=1e-15)


def test_bad_adjacency_is_refused() -> None:
    with pytest.raises(ValueError, match="symmetric"):
        mixing.metropolis(np.array([[0, 1], [0, 0]]))
    with pytest.raises(ValueError, match="square"):
        mixing.unit(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="repeated"):
        mixing.induced(np.zeros((3, 3)), [0, 0])
