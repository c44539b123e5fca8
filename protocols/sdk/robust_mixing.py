"""`robust_mix`: `mix` with the rule a run chose for a protocol's `aggregation` setting
(protocols/robust/aggregation_settings.py), for any protocol whose rows sum to one.

With the default rule, `mean`, it is `mix` itself: a run that names no rule computes what it
computed before robust rules existed, bit for bit. Any other rule acts on the whole model as
one vector, as the papers write x in R^d (Krum's distances and the clipping norms are over all
of it; the coordinate-wise rules are indifferent): the node's and each neighbour's tensors are
flattened in the order of the node's own names, the neighbourhood is the row's (ascending
neighbour id, a missing neighbour's weight on the node, `from_row`), a neighbour that sent a
NaN or an infinity is dropped, and the rule's vector is cut back into the named tensors.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from dfl_node.learning.flat import flatten
from protocols.robust.aggregation_settings import AggregationRule, MeanRule
from protocols.robust.errors import RobustnessError
from protocols.robust.neighbourhood import from_row, without_non_finite
from protocols.sdk.mixing import mix


def robust_mix(aggregation: AggregationRule, weights: Mapping[int, float], me: int,
               mine: Mapping[str, torch.Tensor],
               theirs: Mapping[int, Mapping[str, torch.Tensor]],
               metrics: dict[str, float] | None = None) -> dict[str, torch.Tensor]:
    """The row `weights` (j -> W_ij) of every named tensor aggregated by `aggregation`.

    What the rule did (`dropped_nonfinite`, and a clipping rule's `clipped_neighbours` and
    `radius`) is added to `metrics`, the round's protocol metrics, when given; the mean adds
    nothing. A rule that this neighbourhood cannot honour (Krum after `--on-failure continue`
    took neighbours away) raises RobustnessError naming the node."""
    if isinstance(aggregation, MeanRule):
        return mix(weights, me, mine, theirs)
    names = list(mine)
    with torch.no_grad():
        own = flatten(mine[n] for n in names)
        vectors = {j: flatten(message[n] for n in names) for j, message in theirs.items()}
        try:
            hood, dropped = without_non_finite(from_row(weights, me, own, vectors))
            done = aggregation.aggregate(hood)
        except RobustnessError as exc:
            raise RobustnessError(f"node {me}: aggregation {aggregation.rule}: {exc}") from None
    if metrics is not None:
        metrics.update({"dropped_nonfinite": len(dropped), **done.report})
    out: dict[str, torch.Tensor] = {}
    offset = 0
    for n in names:
        size = mine[n].numel()
        out[n] = done.vector[offset:offset + size].view(mine[n].shape)
        offset += size
    return out
