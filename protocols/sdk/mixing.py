"""sum_j W_ij x_j: the one neighbour-mixing step of every gossip protocol.

The sum runs over the node's row in ascending j (self included), starting from zeros, so its
floating-point result depends on the plan alone, never on the order in which messages arrived;
that is what makes a zmq run equal an inproc one bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch


def mix(weights: Mapping[int, float], me: int, mine: Mapping[str, torch.Tensor],
        theirs: Mapping[int, Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The W-weighted sum of every named tensor over the row `weights` (j -> W_ij).

    A neighbour whose message is missing (it died this round) counts with this node's own
    tensor, so the row still sums to one."""
    out: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name, own in mine.items():
            acc = torch.zeros_like(own)
            for j in sorted(weights):
                x = theirs[j][name].to(own.device) if j != me and j in theirs else own
                acc.add_(x, alpha=weights[j])
            out[name] = acc
    return out
