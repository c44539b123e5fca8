"""SSD-FL cluster formation (Algorithms 1 and 2, eqs. 2-3, 28-29, 35-37 of
the SSD-FL paper) as pure functions on node indices 0..N-1.

Algorithm 1 grows a nested hierarchy of partitions, one per S = 1..N: each step sorts the current
clusters by conductance and lets Algorithm 2 split exactly one of them along its Fiedler vector.
Every candidate is then scored by the Theorem 1 bound averaged over its clusters (H, eq. 28) and
S* is the feasible candidate (min cluster conductance >= Phi^min_S of eq. 37) with the smallest
H. Where the paper's pseudo-code cannot run as written we follow the decisions C1-C12 of
docs/protocols/ssd-fl.md (anchors #c1..#c12):
  - C1 conductance is measured on the cluster's own mixing matrix, self-loops included
    (`conductance_weights: mixing`), or on the 0/1 induced adjacency (`unweighted`);
  - C2 exact enumeration up to `exact_max` members, the best Fiedler sweep cut beyond (`auto`);
  - C3 a singleton's conductance is `singleton_conductance` (0: a partition with an isolated
    device is infeasible), and Algorithm 2 skips singletons;
  - C4 the split index runs 1..|s|-1 and the best split starts at -inf, so a split always
    happens; C5 the loop stops at S = N and every candidate is scored;
  - C7 Algorithm 2 gets Phi^min of the current S, the final filter each candidate's own S;
  - C8 eq. 35 drops tau_a (`threshold_include_tau_a` restores it);
  - C10 a non-positive denominator makes H = +inf (infeasible); C12 no feasible candidate falls
    back to S = 1 (synchronous DFL) and says so.
Ties: clusters sort by (conductance, larger first, smallest member); S* ties go to the smaller S.
Fiedler vectors are sign-normalised (largest-magnitude entry positive) and sorted stably, so the
result is a pure function of the inputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from protocols.ssdfl.clustering_settings import ClusteringConfig, HeterogeneityConfig
from protocols.ssdfl.heterogeneity import ClusterHeterogeneity, cluster_heterogeneity
from protocols.ssdfl.optimizers import OptimizerConfig
from topologies.measures import exact_conductance, fiedler_order, sweep_conductance
from topologies.mixing import induced, lazy, metropolis

Cluster = tuple[int, ...]
Clustering = tuple[Cluster, ...]


@dataclass(frozen=True)
class NodeInputs:
    """What the pre-phase gathered, by node index: optimizers, L_i(theta^0), edge terms."""

    optimizers: tuple[OptimizerConfig, ...]
    losses: tuple[float, ...]
    edge_terms: Mapping[tuple[int, int], float]  # eq. 40's per-edge term, i < j


@dataclass(frozen=True)
class Candidate:
    S: int
    partition: Clustering
    min_conductance: float
    phi_min: float
    H: float
    feasible: bool


@dataclass(frozen=True)
class ClusteringResult:
    candidates: tuple[Candidate, ...]
    partition: Clustering
    s_star: int
    source: str  # "score", "fallback", "override_S" or "override_partition"

    @property
    def fallback(self) -> bool:
        return self.source == "fallback"


def cluster_matrix_of(adj: np.ndarray, members: Cluster, lazy_mixing: bool) -> np.ndarray:
    """A~_s: Metropolis-Hastings on the cluster's induced subgraph (in-cluster degrees)."""
    w = metropolis(induced(adj, members))
    return lazy(w) if lazy_mixing else w


def phi_min(S: int, n: int, cfg: ClusteringConfig) -> float:
    """Eq. 37: sqrt(2 eta + 4 eta B sqrt(floor(N/S)) / ||Delta_tol||) (tau_a factor optional)."""
    tau = cfg.tau_a if cfg.threshold_include_tau_a else 1
    return math.sqrt(2 * cfg.eta + 4 * cfg.eta * tau * cfg.B * math.sqrt(n // S) / cfg.delta_tol)


class Conductances:
    """Phi(G~_s) per cluster, cached: Algorithm 2 asks for the same sides many times."""

    def __init__(self, adj: np.ndarray, cfg: ClusteringConfig) -> None:
        self.adj = adj
        self.cfg = cfg
        self._cache: dict[Cluster, float] = {}

    def weights(self, members: Cluster) -> np.ndarray:
        if self.cfg.conductance_weights == "unweighted":
            return induced(self.adj, members)
        return cluster_matrix_of(self.adj, members, self.cfg.lazy_mixing)

    def __call__(self, members: Cluster) -> float:
        if members not in self._cache:
            self._cache[members] = self._compute(members)
        return self._cache[members]

    def _compute(self, members: Cluster) -> float:
        if len(members) == 1:
            return self.cfg.singleton_conductance
        w = self.weights(members)
        method = self.cfg.conductance
        if method == "exact" or (method == "auto" and len(members) <= self.cfg.exact_max):
            return exact_conductance(w)
        return sweep_conductance(w)


def canonical(clusters: Sequence[Sequence[int]]) -> Clustering:
    """Members sorted, clusters ordered by their smallest member: cluster id = position."""
    return tuple(sorted((tuple(sorted(c)) for c in clusters), key=lambda c: c[0]))


def best_split(members: Cluster, phi: Conductances) -> tuple[float, Clustering]:
    """Algorithm 2, lines 4-13: the Fiedler-order split maximising min(Phi(a), Phi(b))."""
    order = [members[k] for k in fiedler_order(phi.weights(members))]
    best, split = -math.inf, canonical([order[:1], order[1:]])
    for n in range(1, len(order)):
        a, b = tuple(sorted(order[:n])), tuple(sorted(order[n:]))
        value = min(phi(a), phi(b))
        if value > best:
            best, split = value, canonical([a, b])
    return best, split


def split_once(partition: Clustering, threshold: float, phi: Conductances) -> Clustering:
    """Algorithm 2: split the first cluster (ascending conductance) whose best split passes
    `threshold`; if none does, split the lowest-conductance splittable cluster anyway."""
    queue = sorted(partition, key=lambda c: (phi(c), -len(c), c[0]))
    saved: tuple[Cluster, Clustering] | None = None
    for members in queue:
        if len(members) < 2:
            continue
        best, split = best_split(members, phi)
        if best >= threshold:
            return canonical([c for c in partition if c != members] + list(split))
        saved = saved or (members, split)
    if saved is None:
        raise ValueError("every cluster is a singleton: nothing to split")
    return canonical([c for c in partition if c != saved[0]] + list(saved[1]))


def candidate_partitions(adj: np.ndarray, cfg: ClusteringConfig,
                         phi: Conductances | None = None) -> list[Clustering]:
    """Algorithm 1, lines 3-11: one nested partition per S = 1..N."""
    n = len(adj)
    phi = phi or Conductances(adj, cfg)
    out = [canonical([range(n)])]
    while len(out[-1]) < n:
        out.append(split_once(out[-1], phi_min(len(out[-1]), n, cfg), phi))
    return out


def cluster_score(adj: np.ndarray, members: Cluster, losses: Sequence[float],
                  het: ClusterHeterogeneity, cfg: ClusteringConfig) -> float:
    """H_s, the Theorem 1 bound (eq. 28-29) at the shared init, where L~_s = sum_i L_i."""
    w = cluster_matrix_of(adj, members, cfg.lazy_mixing)
    lam_min = float(np.linalg.eigvalsh(w)[0])
    gamma_eff = cfg.gamma + 1.0 + (1.0 - lam_min) / cfg.eta  # Prop. 1
    big_gamma = gamma_eff + cfg.tau_a * cfg.B * math.sqrt(len(members))  # eq. 29
    own = [losses[i] for i in members]
    loss = sum(own) if cfg.h_numerator == "sum" else sum(own) / len(own)
    denom = cfg.eta - (het.alpha + 1.0) * cfg.eta**2 / 2.0 * big_gamma
    if denom <= 0:
        return math.inf
    return (loss + cfg.alpha * cfg.tau_a * cfg.eta**2 / 2.0 * big_gamma) / denom


def heterogeneity_of(members: Cluster, inputs: NodeInputs,
                     cfg: ClusteringConfig) -> ClusterHeterogeneity:
    return cluster_heterogeneity(members, inputs.optimizers, inputs.edge_terms, cfg)


def score(adj: np.ndarray, partition: Clustering, inputs: NodeInputs,
          cfg: ClusteringConfig) -> float:
    """H(P): the mean of H_s over the partition's clusters (Algorithm 1, line 7)."""
    return sum(cluster_score(adj, c, inputs.losses, heterogeneity_of(c, inputs, cfg), cfg)
               for c in partition) / len(partition)


def evaluate(adj: np.ndarray, partitions: Sequence[Clustering], inputs: NodeInputs,
             cfg: ClusteringConfig, phi: Conductances) -> tuple[Candidate, ...]:
    n = len(adj)
    out = []
    for partition in partitions:
        S = len(partition)
        min_phi = min(phi(c) for c in partition)
        threshold = phi_min(S, n, cfg)
        h = score(adj, partition, inputs, cfg)
        feasible = (min_phi >= threshold and math.isfinite(h)
                    and min(len(c) for c in partition) >= cfg.min_cluster_size)
        out.append(Candidate(S, partition, min_phi, threshold, h, feasible))
    return tuple(out)


def choose(candidates: Sequence[Candidate]) -> Candidate | None:
    """Algorithm 1, line 12: the feasible candidate with the smallest H (ties: smaller S)."""
    feasible = [c for c in candidates if c.feasible]
    return min(feasible, key=lambda c: (c.H, c.S)) if feasible else None


def check_overrides(cfg: ClusteringConfig, n: int) -> None:
    """ValueError (one line) unless the overrides fit N nodes (positions 0..N-1)."""
    if cfg.override_partition is not None \
            and sorted(i for c in cfg.override_partition for i in c) != list(range(n)):
        raise ValueError(f"clustering.override_partition must partition the nodes, "
                         f"got {cfg.override_partition}")
    if cfg.override_S is not None and cfg.override_S > n:
        raise ValueError(f"clustering.override_S={cfg.override_S} exceeds N={n}")


def form_clusters(adj: np.ndarray, inputs: NodeInputs, cfg: ClusteringConfig) -> ClusteringResult:
    """The whole of Algorithm 1 plus the overrides and the S = 1 fallback
    (docs/protocols/ssd-fl.md#c12)."""
    check_overrides(cfg, len(adj))
    phi = Conductances(np.asarray(adj, dtype=np.float64), cfg)
    candidates = evaluate(phi.adj, candidate_partitions(phi.adj, cfg, phi), inputs, cfg, phi)
    if cfg.override_partition is not None:
        partition = canonical(cfg.override_partition)
        return ClusteringResult(candidates, partition, len(partition), "override_partition")
    if cfg.override_S is not None:
        return ClusteringResult(candidates, candidates[cfg.override_S - 1].partition,
                                cfg.override_S, "override_S")
    best = choose(candidates)
    if best is None:
        return ClusteringResult(candidates, candidates[0].partition, 1, "fallback")
    return ClusteringResult(candidates, best.partition, best.S, "score")


def config_record(cfg: ClusteringConfig) -> dict[str, Any]:
    """The configuration as plain JSON data, for clustering.json (the eqs. 38-41 constants
    under `heterogeneity`)."""
    data = cfg.as_dict()
    record = {k: v for k, v in data.items() if k not in HeterogeneityConfig.model_fields}
    record["heterogeneity"] = {k: data[k] for k in HeterogeneityConfig.model_fields}
    return record
