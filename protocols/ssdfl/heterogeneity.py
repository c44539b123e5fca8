"""SSD-FL's heterogeneity score alpha_s of a cluster (eqs. 38-41 of the SSD-FL paper).

alpha_s = alpha_s^o + alpha_s^d amplifies the gradient noise in the Theorem 1 bound, so the
cluster score H prefers clusters whose members train alike. The optimizer part averages over all
ordered pairs of members, i = j included (eq. 38, docs/protocols/ssd-fl.md#c14); the data part
averages, over the
cluster's internal edges only, the Jensen-Shannon divergence of label frequencies (base 2, in
[0, 1]) plus the squared empirical energy distance of raw samples divided by the feature count
w*z (eq. 40, V-statistic). An edgeless cluster has beta^d = 0 (docs/protocols/ssd-fl.md#c13;
the paper divides by
|E_s| = 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from protocols.ssdfl.clustering_settings import HeterogeneityConfig
from protocols.ssdfl.optimizers import OptimizerConfig


@dataclass(frozen=True)
class ClusterHeterogeneity:
    beta_o: float
    beta_d: float
    alpha_o: float
    alpha_d: float

    @property
    def alpha(self) -> float:
        return self.alpha_o + self.alpha_d


def jsd(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence in bits of two frequency vectors (0 log 0 = 0)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    m = (p + q) / 2.0
    return 0.5 * _kl(p, m) + 0.5 * _kl(q, m)


def _kl(p: np.ndarray, m: np.ndarray) -> float:
    mask = p > 0
    return float(np.sum(p[mask] * np.log2(p[mask] / m[mask])))


def energy_distance(x: np.ndarray, y: np.ndarray) -> float:
    """Squared empirical energy distance (V-statistic: the sums include h = m)."""
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    return 2.0 * _mean_dist(x, y) - _mean_dist(x, x) - _mean_dist(y, y)


def _mean_dist(a: np.ndarray, b: np.ndarray) -> float:
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return float(np.sqrt(np.maximum(sq, 0.0)).mean())


def edge_divergence(hist_i: np.ndarray, hist_j: np.ndarray, sample_i: np.ndarray,
                    sample_j: np.ndarray) -> float:
    """One edge's term of eq. 40: JSD(Y_i || Y_j) + EED(D_i, D_j) / (w z)."""
    features = int(np.prod(sample_i.shape[1:]))
    return jsd(hist_i, hist_j) + energy_distance(sample_i, sample_j) / features


def cluster_heterogeneity(members: Sequence[int], optimizers: Sequence[OptimizerConfig],
                          edge_terms: Mapping[tuple[int, int], float],
                          cfg: HeterogeneityConfig) -> ClusterHeterogeneity:
    """alpha_s of the cluster `members` (indices); `edge_terms` is keyed by edges (i, j), i < j."""
    z1, z2, z3 = cfg.zeta
    opts = [optimizers[i] for i in members]
    beta_o = sum(z1 * (a.type != b.type) + z2 * abs(a.mu - b.mu) + z3 * abs(a.rho - b.rho)
                 for a in opts for b in opts) / len(opts) ** 2
    inside = set(members)
    terms = [t for (i, j), t in edge_terms.items() if i in inside and j in inside]
    beta_d = sum(terms) / len(terms) if terms else 0.0
    (o_min, o_max), (d_min, d_max) = cfg.alpha_o, cfg.alpha_d
    return ClusterHeterogeneity(
        beta_o=beta_o, beta_d=beta_d,
        alpha_o=beta_o / (z1 + z2 + z3) * (o_max - o_min) + o_min,  # eq. 39
        alpha_d=beta_d * (d_max - d_min) + d_min,  # eq. 41
    )
