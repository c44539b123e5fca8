"""sum_j W_ij x_j: the one neighbour-mixing step of every gossip protocol, and the rows it
runs over on directed graphs: Push-Sum's column-stochastic `push_row`, and `uniform_row`.

The sum runs over the node's row in ascending j (self included), starting from zeros, so its
floating-point result depends on the plan alone, never on the order in which messages arrived;
that is what makes a zmq run equal an inproc one bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch


def mix(weights: Mapping[int, float], me: int, mine: Mapping[str, torch.Tensor],
        theirs: Mapping[int, Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The W-weighted sum of every named tensor over the row `weights` (j -> W_ij).

    A neighbour whose message is missing (it died this round) counts with this node's own
    tensor, so the row still sums to one."""
    # The row's order and each term's source are the same for every tensor: found once per
    # call, not once per tensor (this runs every round of every gossip protocol).
    row = [(weights[j], theirs[j] if j != me and j in theirs else None) for j in sorted(weights)]
    out: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name, own in mine.items():
            acc = torch.zeros_like(own)
            for w, source in row:
                x = own if source is None else source[name]
                acc.add_(x if x.device == own.device else x.to(own.device), alpha=w)
            out[name] = acc
    return out


def push_row(me: int, in_neighbors: Iterable[int],
             out_degree: Callable[[int], int]) -> dict[int, float]:
    """Row i of Push-Sum's uniform column-stochastic matrix P: P_ij = 1 / (1 + d_out(j)) for j
    in {i} and i's in-neighbours, 0 elsewhere (`out_degree(j)`: d_out(j) this round).

    Column j sums to one because node j splits what it holds evenly over itself and its
    d_out(j) out-neighbours; so the sum over nodes of `mix(push_row(...))` is kept (mass
    conservation), while the rows need not sum to one: that is what Push-Sum's weight corrects
    (x / w). `mix` with this row is sum_j P_ij x_j, each sender's share scaled at the receiver,
    which knows d_out(j) from the plan."""
    row = {j: 1.0 / (1 + out_degree(j)) for j in {me, *in_neighbors}}
    return dict(sorted(row.items()))


def uniform_row(me: int, in_neighbors: Iterable[int]) -> dict[int, float]:
    """1 / (1 + |N_in(i)|) on i and on each in-neighbour: the plain average of what arrived
    with the node's own (row-stochastic; Epidemic Learning's aggregation)."""
    peers = {me, *in_neighbors}
    return dict.fromkeys(sorted(peers), 1.0 / len(peers))
