"""Mixing weights and spectral quantities, as dense float64 matrices in sorted-id order.

Every weight function takes an adjacency matrix `adj` (symmetric, zero diagonal; a nonzero entry
marks an edge) and returns an n x n matrix that is zero off the graph and off the diagonal.

| scheme           | W_ij on an edge         | W_ii                  | symmetric | stochastic |
|------------------|-------------------------|-----------------------|-----------|------------|
| `metropolis`     | 1 / (1 + max(d_i, d_j)) | 1 - sum_j W_ij        | yes       | doubly     |
| `max-degree`     | 1 / (1 + d_max)         | 1 - d_i / (1 + d_max) | yes       | doubly     |
| `unit`           | 1                       | 0                     | yes       | neither    |
| `weighted`       | the edge's `weight`     | 0                     | yes       | neither    |
| `lazy-<s>`       | (I + W_s) / 2           | (1 + W_s,ii) / 2      | as s      | as s       |

`metropolis` (Metropolis-Hastings, Xiao-Boyd-Lall 2005) is the default: each node computes its row
from its neighbours' degrees alone. `max-degree` needs the global maximum degree. `unit` and
`weighted` are not averaging matrices but coupling weights a_ij of a graph-Laplacian penalty
(DMFL-SQ's alpha/2 sum a_ij ||w_i - w_j||^2); `weighted` takes the edge `weight` attributes of the
topology file, so only `mixing_matrix(topology, "weighted")` sees them. `lazy(W)` shifts the
spectrum of a stochastic W into [0, 1], which some convergence proofs assume; it is offered for
the stochastic schemes only. Clusters (SSD-FL) mix over the subgraph induced by their members:
`metropolis(induced(adj, members))` uses in-cluster degrees, and an isolated member keeps its own
model (weight 1 on itself); `cluster_matrix` stacks the clusters' matrices block-diagonally.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import get_args

import numpy as np

from topologies.errors import TopologyError
from topologies.mixing_schemes import MixingScheme
from topologies.model import Topology


def _edge_mask(adj: np.ndarray) -> np.ndarray:
    a = np.asarray(adj, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"adjacency must be a square matrix, got shape {a.shape}")
    if not np.array_equal(a, a.T) or np.any(np.diag(a) != 0):
        raise ValueError("adjacency must be symmetric with a zero diagonal")
    return a != 0


def metropolis(adj: np.ndarray) -> np.ndarray:
    """Metropolis-Hastings weights: symmetric and doubly stochastic on any undirected graph."""
    mask = _edge_mask(adj)
    degree = mask.sum(axis=1)
    w = np.where(mask, 1.0 / (1.0 + np.maximum.outer(degree, degree)), 0.0)
    np.fill_diagonal(w, 1.0 - w.sum(axis=1))
    return w


def max_degree(adj: np.ndarray) -> np.ndarray:
    """Uniform weights 1/(1 + d_max) on every edge: symmetric and doubly stochastic."""
    mask = _edge_mask(adj)
    degree = mask.sum(axis=1)
    scale = 1.0 / (1.0 + degree.max(initial=0))
    w = mask * scale
    np.fill_diagonal(w, 1.0 - degree * scale)
    return w


def unit(adj: np.ndarray) -> np.ndarray:
    """a_ij = 1 on every edge: Laplacian coupling weights, neither row- nor column-stochastic."""
    return _edge_mask(adj).astype(np.float64)


def weighted(adj: np.ndarray) -> np.ndarray:
    """The weighted adjacency itself (`Topology.adjacency(weighted=True)`): coupling weights."""
    _edge_mask(adj)
    if np.any(np.asarray(adj) < 0):
        raise ValueError("edge weights must be non-negative")
    return np.array(adj, dtype=np.float64)


def lazy(w: np.ndarray) -> np.ndarray:
    """(I + W) / 2: same stochasticity and symmetry as W, eigenvalues moved into [0, 1]."""
    return (np.eye(len(w)) + w) / 2.0


WEIGHTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "metropolis": metropolis,
    "max-degree": max_degree,
    "unit": unit,
}
STOCHASTIC = ("metropolis", "max-degree")


def mixing_matrix(topology: Topology, scheme: str = "metropolis") -> np.ndarray:
    """The matrix of a scheme name from the table above (`lazy-` prefix included)."""
    if scheme == "weighted":
        return weighted(topology.adjacency(weighted=True))
    base = scheme.removeprefix("lazy-")
    make_lazy = base != scheme
    if base not in WEIGHTS or (make_lazy and base not in STOCHASTIC):
        known = ", ".join(get_args(MixingScheme))
        raise TopologyError(f"mixing: unknown scheme {scheme!r} (known: {known})")
    w = WEIGHTS[base](topology.adjacency())
    return lazy(w) if make_lazy else w


def induced(adj: np.ndarray, subset: Iterable[int]) -> np.ndarray:
    """The adjacency among `subset` (row indices), in increasing index order: a cluster's graph."""
    idx = sorted(subset)
    if len(set(idx)) != len(idx):
        raise ValueError(f"subset has repeated indices: {idx}")
    return np.asarray(adj, dtype=np.float64)[np.ix_(idx, idx)]


def cluster_matrix(
    adj: np.ndarray,
    clusters: Sequence[Iterable[int]],
    weights: Callable[[np.ndarray], np.ndarray] = metropolis,
) -> np.ndarray:
    """Block-diagonal n x n matrix: each cluster mixes with `weights` on its induced subgraph.

    `clusters` must partition the row indices 0..n-1; links between clusters get weight 0.
    """
    n = len(adj)
    members = [sorted(c) for c in clusters]
    covered = sorted(i for c in members for i in c)
    if covered != list(range(n)):
        raise ValueError(f"clusters must partition the indices 0..{n - 1}, got {members}")
    w = np.zeros((n, n))
    for idx in members:
        w[np.ix_(idx, idx)] = weights(induced(adj, idx))
    return w
