"""SSD-FL cluster formation as pure functions: conductance, thresholds, scores, Algorithm 1."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest

from protocols.ssdfl.clustering import (
    Conductances,
    NodeInputs,
    candidate_partitions,
    choose,
    cluster_score,
    exact_conductance,
    form_clusters,
    phi_min,
    sweep_conductance,
)
from protocols.ssdfl.clustering_settings import (
    ClusteringConfig,
    ClusteringSettings,
    HeterogeneityConfig,
)
from protocols.ssdfl.heterogeneity import (
    cluster_heterogeneity,
    energy_distance,
    jsd,
)
from protocols.ssdfl.optimizers import OptimizerConfig
from topologies.mixing import metropolis


def brute_conductance(w: np.ndarray) -> float:
    """Eq. 2-3 literally: min over V with 0 < vol(V) <= vol/2 of cut / min(vol V, vol V^c)."""
    n = len(w)
    d = w.sum(axis=1)
    total = d.sum()
    best = math.inf
    for size in range(1, n):
        for subset in itertools.combinations(range(n), size):
            inside = set(subset)
            vol = sum(d[i] for i in subset)
            if not 0 < vol <= total / 2:
                continue
            cut = sum(w[i, j] for i in subset for j in range(n) if j not in inside)
            best = min(best, cut / min(vol, total - vol))
    return best


def graphs() -> list[np.ndarray]:
    out = [nx.to_numpy_array(nx.path_graph(7)), nx.to_numpy_array(nx.complete_graph(6)),
           nx.to_numpy_array(nx.barbell_graph(4, 1))]
    for seed in range(4):
        g = nx.connected_watts_strogatz_graph(10, 4, 0.3, seed=seed)
        out.append(nx.to_numpy_array(g, nodelist=range(10)))
    return out


def inputs_for(n: int, loss: float = math.log(10)) -> NodeInputs:
    return NodeInputs(tuple(OptimizerConfig() for _ in range(n)), (loss,) * n, {})


@pytest.mark.parametrize("adj", graphs())
def test_exact_conductance_matches_brute_force_on_mh_and_unweighted(adj: np.ndarray) -> None:
    for w in (metropolis(adj), adj):
        assert exact_conductance(w) == pytest.approx(brute_conductance(w), abs=1e-12)
        assert sweep_conductance(w) >= exact_conductance(w) - 1e-12  # a sweep is an upper bound


def test_table_conductances_match_brute_force_for_every_cluster() -> None:
    adj = graphs()[-1]
    cfg = ClusteringConfig(eta=0.01, tau_a=3)
    phi = Conductances(adj, cfg)
    result = form_clusters(adj, inputs_for(10), cfg)
    for cand in result.candidates:
        values = [0.0 if len(c) == 1 else brute_conductance(metropolis(adj[np.ix_(c, c)]))
                  for c in cand.partition]
        assert cand.min_conductance == pytest.approx(min(values), abs=1e-12)
        assert all(phi(c) == pytest.approx(v, abs=1e-12)
                   for c, v in zip(cand.partition, values, strict=True))


def test_known_conductances() -> None:
    # K4 with MH weights 1/4: the best cut is 2 | 2 with cut 4/4 = 1 over vol 2
    assert exact_conductance(metropolis(nx.to_numpy_array(nx.complete_graph(4)))) == 0.5
    # a disconnected graph has conductance 0
    assert exact_conductance(np.kron(np.eye(2), np.ones((2, 2))) - np.eye(4)) == 0.0


@pytest.mark.parametrize("adj", graphs())
def test_one_nested_partition_per_s_and_deterministic(adj: np.ndarray) -> None:
    n = len(adj)
    cfg = ClusteringConfig(eta=0.01, tau_a=3)
    parts = candidate_partitions(adj, cfg)
    assert [len(p) for p in parts] == list(range(1, n + 1))
    for p in parts:
        assert sorted(i for c in p for i in c) == list(range(n))
    for coarse, fine in itertools.pairwise(parts):  # each step splits exactly one cluster
        assert len(set(coarse) - set(fine)) == 1 and len(set(fine) - set(coarse)) == 2
    assert candidate_partitions(adj.copy(), cfg) == parts
    assert form_clusters(adj, inputs_for(n), cfg) == form_clusters(adj, inputs_for(n), cfg)


def test_barbell_splits_at_the_bridge_first() -> None:
    adj = nx.to_numpy_array(nx.barbell_graph(5, 0))  # two K5 joined by one edge
    parts = candidate_partitions(adj, ClusteringConfig(eta=0.01, tau_a=3))
    assert parts[1] == ((0, 1, 2, 3, 4), (5, 6, 7, 8, 9))


def test_phi_min_is_eq_37_and_falls_with_s() -> None:
    cfg = ClusteringConfig(eta=0.01, tau_a=3, B=1.0, delta_tol=10.0)
    assert phi_min(1, 30, cfg) == pytest.approx(math.sqrt(0.02 + 0.04 * math.sqrt(30) / 10))
    assert phi_min(4, 30, cfg) == pytest.approx(math.sqrt(0.02 + 0.04 * math.sqrt(7) / 10))
    values = [phi_min(s, 30, cfg) for s in range(1, 31)]
    assert values == sorted(values, reverse=True)
    with_tau = ClusteringConfig(eta=0.01, tau_a=3, threshold_include_tau_a=True)
    assert phi_min(1, 30, with_tau) == pytest.approx(math.sqrt(0.02 + 0.12 * math.sqrt(30) / 10))


def test_cluster_score_is_the_theorem_1_bound() -> None:
    adj = nx.to_numpy_array(nx.complete_graph(3))
    cfg = ClusteringConfig(eta=0.01, tau_a=3, B=1.0, gamma=1.0, alpha=0.1)
    het = cluster_heterogeneity((0, 1, 2), [OptimizerConfig()] * 3, {}, HeterogeneityConfig())
    lam_min = 0.0  # MH on K3: all weights 1/3, eigenvalues 1, 0, 0
    big_gamma = 1 + 1 + (1 - lam_min) / 0.01 + 3 * math.sqrt(3)
    expected = (3 * 2.0 + 0.1 * 3 * 0.01**2 / 2 * big_gamma) / (0.01 - 0.01**2 / 2 * big_gamma)
    assert cluster_score(adj, (0, 1, 2), [2.0] * 3, het, cfg) == pytest.approx(expected)
    greedy = ClusteringConfig(eta=0.01, tau_a=3, B=100.0)
    # docs/protocols/ssd-fl.md#c10
    assert cluster_score(adj, (0, 1, 2), [2.0] * 3, het, greedy) == math.inf


def test_heterogeneity_terms() -> None:
    assert jsd(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(1.0)
    assert jsd(np.array([0.5, 0.5]), np.array([0.5, 0.5])) == 0.0
    x, y = np.array([[0.0], [2.0]]), np.array([[1.0]])
    # V-statistic: 2 * mean|x-y| - mean|x-x'| - mean|y-y'| = 2 * 1 - 1 - 0
    assert energy_distance(x, y) == pytest.approx(1.0)
    opts = [OptimizerConfig(), OptimizerConfig(type="prox", mu=1e-4),
            OptimizerConfig(type="momentum", rho=0.8)]
    het = cluster_heterogeneity((0, 1, 2), opts, {(0, 1): 0.5, (1, 2): 0.25, (0, 5): 9.0},
                                HeterogeneityConfig())
    pairs = 6 + 2 * 1e-4 + 2 * 0.8 + 2 * 0.8 + 2 * 1e-4  # ordered pairs, i = j included
    assert het.beta_o == pytest.approx(pairs / 9)
    assert het.alpha_o == pytest.approx(pairs / 9 / 3 * 0.2)
    assert het.beta_d == pytest.approx(0.375)  # only the cluster's own edges
    assert het.alpha == pytest.approx(het.alpha_o + 0.375 * 0.2)


def test_choice_overrides_and_fallback() -> None:
    adj = nx.to_numpy_array(nx.complete_graph(10))
    cfg = ClusteringConfig(eta=0.01, tau_a=3)
    result = form_clusters(adj, inputs_for(10), cfg)
    best = choose(result.candidates)
    assert best is not None and result.s_star == best.S and result.source == "score"
    assert result.s_star != 1  # docs/protocols/ssd-fl.md#c9: the literal rule splits K10
    forced = form_clusters(adj, inputs_for(10),
                           ClusteringConfig(eta=0.01, tau_a=3, override_S=1))
    assert forced.partition == (tuple(range(10)),) and forced.source == "override_S"
    strict = ClusteringConfig(eta=0.01, tau_a=3, delta_tol=1e-6)  # no partition passes it
    fallback = form_clusters(adj, inputs_for(10), strict)
    assert fallback.fallback and fallback.s_star == 1
    given = ClusteringConfig(eta=0.01, tau_a=3,
                             override_partition=((0, 1, 2), (3, 4, 5, 6, 7, 8, 9)))
    assert form_clusters(adj, inputs_for(10), given).s_star == 2


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="conductance"):
        ClusteringSettings.model_validate({"conductance": "fast"})
    with pytest.raises(ValueError, match="delta"):
        ClusteringSettings.model_validate({"delta": 1})
    settings = ClusteringSettings.model_validate({"eta": None, "zeta": [1, 2, 3]})
    cfg = ClusteringConfig.resolve(settings, 0.05, 2)
    assert cfg.eta == 0.05 and cfg.zeta == (1.0, 2.0, 3.0) and cfg.tau_a == 2
    assert ClusteringConfig.resolve(ClusteringSettings(eta=0.2), 0.05, 2).eta == 0.2
