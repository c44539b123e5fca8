"""The consensus gap of a set of nodes' models, one computation for every reader: the per-cycle
metrics (from params records), the honest nodes' consensus distance (from final models)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np


def consensus_gap(params: Mapping[int, Mapping[str, np.ndarray]], members: Sequence[int],
                  names: Sequence[str]) -> float:
    """sqrt(sum over `members` i of ||theta_i - theta_bar||^2), theta_bar their mean, summed
    in float64 tensor by tensor in `names` order: the network's consensus gap, a cluster's,
    and the honest nodes' consensus distance (from params records or final models alike)."""
    sq = 0.0
    for name in names:
        stack = np.stack([params[i][name].astype(np.float64) for i in members])
        sq += float(((stack - stack.mean(axis=0)) ** 2).sum())
    return math.sqrt(sq)
