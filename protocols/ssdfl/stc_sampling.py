"""Random graphs for SSD-FL's stochastic baselines, drawn identically by every device.

STC (Koloskova et al. 2020, the paper's ref. [15]) mixes with a time-varying matrix W^(t): at
every communication step each edge of G is kept independently with probability p_edge, and W^(t)
is Metropolis-Hastings on the sampled graph (docs/protocols/stc.md). A device's MH row needs its
neighbours' *sampled* degrees, so each device draws the state of every edge, not only of its
own: edge (u, v) has its own stream, seeded from (run seed, "stc/u-v") alone, and every device
draws one number from every edge's stream per step. Both ends of an edge therefore agree on it
in every step without a message, and the draws of one edge never depend on the others.

cSTC (docs/protocols/cstc.md): S ~ Uniform{low..high} (high defaults to floor(N/2)) and a random
membership into S near-equal clusters, from one shared stream; in the intra regime the sampled
graph is cut to in-cluster edges (clusters may even be disconnected inside: a "careless"
clustering is the point of the baseline).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from protocols.sdk import numpy_stream
from topologies.mixing import WEIGHTS, lazy

SHARED = -1  # the node id of streams every device derives alike


class EdgeSampler:
    """Per-step sampled adjacency of G (ids in plan order), one draw per edge per step."""

    # saved by dfl_node/state/checkpoint_codec.py
    checkpoint_fields: ClassVar[tuple[str, ...]] = ("streams",)

    def __init__(self, seed: int, ids: Sequence[int], edges: Sequence[tuple[int, int]],
                 p_edge: float) -> None:
        pos = {node: k for k, node in enumerate(ids)}
        self.n = len(ids)
        self.p_edge = p_edge
        self.pairs = sorted((min(pos[u], pos[v]), max(pos[u], pos[v])) for u, v in edges)
        self.streams = [numpy_stream(seed, SHARED, f"stc/{ids[a]}-{ids[b]}")
                        for a, b in self.pairs]

    def next_adjacency(self) -> np.ndarray:
        """The next step's sampled graph; every edge's stream advances by one draw."""
        adj = np.zeros((self.n, self.n))
        for (a, b), stream in zip(self.pairs, self.streams, strict=True):
            if stream.random() < self.p_edge:
                adj[a, b] = adj[b, a] = 1.0
        return adj


def mixing_row(adj: np.ndarray, scheme: str, ids: Sequence[int], node: int) -> dict[int, float]:
    """Row `node` of the plan's mixing scheme (e.g. metropolis, lazy-metropolis) built on `adj`:
    the same floats as the plan's weights when `adj` is all of G. An isolated node keeps its
    model (weight 1)."""
    base = scheme.removeprefix("lazy-")
    w = WEIGHTS[base](adj)
    if base != scheme:
        w = lazy(w)
    k = list(ids).index(node)
    return {ids[c]: float(w[k, c]) for c in np.nonzero(w[k])[0].tolist()}


def random_partition(seed: int, ids: Sequence[int], low: int,
                     high: int | None) -> list[list[int]]:
    """cSTC's clusters: S ~ Uniform{low..high} (high None: floor(N/2), at least low), members by
    a random permutation dealt round-robin, so sizes differ by at most one."""
    rng = numpy_stream(seed, SHARED, "cstc/clusters")
    n = len(ids)
    top = max(low, n // 2) if high is None else high
    s = min(n, int(rng.integers(low, top + 1)))
    order = rng.permutation(n)
    return [sorted(ids[k] for k in order[c::s]) for c in range(s)]


def same_cluster(ids: Sequence[int], clusters: Sequence[Sequence[int]]) -> np.ndarray:
    """0/1 mask of pairs in the same cluster (plan order), to cut a sampled graph to A~'s edges."""
    label = {node: c for c, members in enumerate(clusters) for node in members}
    labels = np.array([label[i] for i in ids])
    return (labels[:, None] == labels[None, :]).astype(np.float64)
