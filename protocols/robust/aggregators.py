"""The order-statistics and distance rules over a node's neighbourhood (own vector included):
coordinate-wise median and trimmed mean (Yin et al. 2018), Krum and Multi-Krum (Blanchard et
al. 2017), and BRIDGE-T's screening (Fang, Yang, Bajwa 2022).

These rules read no mixing weight: each paper states them over a set of equally counted
vectors. With nothing trimmed or every candidate selected they are the plain average of the
neighbourhood, which is gossip's row on a regular graph under Metropolis weights (a ring's
1/3, 1/3, 1/3). Sorting is exact (no arithmetic), and the sums after it run in row order
(`neighbourhood.ordered_sum`), so every process gets the same bits.
"""

from __future__ import annotations

import torch

from protocols.robust.neighbourhood import Neighbourhood, ordered_mean
from protocols.robust.requirements import (
    check_bridge,
    check_krum,
    check_multi_krum,
    check_trimmed_mean,
)


def _sorted_columns(rows: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The rows stacked, each coordinate's values in ascending order (n, d)."""
    return torch.sort(torch.stack(rows), dim=0, stable=True).values


def _midpoint(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(a + b) / 2 as a/2 + b/2: no overflow to infinity between two large finite values."""
    return a.mul(0.5).add_(b, alpha=0.5)


def coordinate_median(hood: Neighbourhood) -> torch.Tensor:
    """med{x_k}_j over the n = 1 + |N_i| members for every coordinate j (Yin et al. 2018,
    Definition 1); for an even n the midpoint of the two middle values."""
    values = _sorted_columns(hood.members)
    n = hood.size
    if n % 2:
        return values[n // 2].clone()
    return _midpoint(values[n // 2 - 1], values[n // 2])


def trimmed_mean(hood: Neighbourhood, b: int) -> torch.Tensor:
    """For every coordinate, the mean of the n - 2b values left when the b largest and the b
    smallest of the n members are removed (Yin et al. 2018, Definition 2, with b = beta n)."""
    n = hood.size
    check_trimmed_mean(b, n)
    values = _sorted_columns(hood.members)
    return ordered_mean(values[b:n - b], hood.own)


def bridge(hood: Neighbourhood, b: int) -> torch.Tensor:
    """BRIDGE-T's screening (Fang, Yang, Bajwa 2022): for every coordinate, drop the b largest
    and the b smallest of the neighbours' values, and average what is left together with the
    node's own value, which is never screened:
    y_i = (x_i + sum of the |N_i| - 2b kept neighbour values) / (|N_i| - 2b + 1)."""
    k = len(hood.neighbours)
    check_bridge(b, k)
    kept = _sorted_columns(hood.neighbours)[b:k - b]
    return ordered_mean((hood.own, *kept), hood.own)


def krum_scores(hood: Neighbourhood, f: int) -> list[float]:
    """s(k) = sum over the n - f - 2 members closest to x_k of ||x_k - x_l||^2, for each
    member k in order (own first) (Blanchard et al. 2017). Distances in float64, so
    that the float32 vectors of an attacker cannot overflow them."""
    n = hood.size
    check_krum(f, n)
    members = hood.members
    squared = [[0.0] * n for _ in range(n)]
    for a in range(n):
        for c in range(a + 1, n):
            d = float(torch.linalg.vector_norm(members[a] - members[c], dtype=torch.float64))
            squared[a][c] = squared[c][a] = d * d
    closest = n - f - 2
    return [sum(sorted(squared[a][c] for c in range(n) if c != a)[:closest]) for a in range(n)]


def _lowest(scores: list[float], m: int) -> list[int]:
    """The positions of the m lowest scores, ties to the earlier member, in member order."""
    return sorted(sorted(range(len(scores)), key=lambda k: (scores[k], k))[:m])


def krum(hood: Neighbourhood, f: int) -> torch.Tensor:
    """The member with the lowest Krum score (ties: the earlier member, the node first)."""
    (chosen,) = _lowest(krum_scores(hood, f), 1)
    return hood.members[chosen].clone()


def multi_krum(hood: Neighbourhood, f: int, m: int) -> torch.Tensor:
    """The plain mean of the m members with the lowest Krum scores (Blanchard et al. 2017,
    Multi-Krum); m = 1 is Krum, m = n the neighbourhood's mean."""
    check_multi_krum(f, m, hood.size)
    chosen = _lowest(krum_scores(hood, f), m)
    return ordered_mean((hood.members[k] for k in chosen), hood.own)
