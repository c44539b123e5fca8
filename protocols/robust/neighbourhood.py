"""What every robust rule aggregates: this node's own vector, its neighbours' in a fixed order,
and the mixing weights of the node's row, checked once here so that no rule has to.

Vectors are flat float tensors (a whole model as one vector: Krum's distances and the
clipping norms are over all of it, as the papers write x in R^d). The order is the row's
ascending neighbour id (`from_row`), the one `protocols.sdk.mix` sums in, so ties are broken
the same way in every process. Sums over neighbours are taken one term after the other in that
order (`ordered_sum`), never by a reduction over a stacked dimension whose blocking could
depend on the thread count: that is what keeps a zmq run equal to an inproc one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch

from protocols.robust.errors import RobustnessError


@dataclass(frozen=True)
class Neighbourhood:
    """x_i, its weight W_ii, and (x_j, W_ij) for each neighbour j in the row's order."""

    own: torch.Tensor
    neighbours: tuple[torch.Tensor, ...]
    weights: tuple[float, ...]
    """W_ij, one per neighbour, in the order of `neighbours`."""
    own_weight: float

    def __post_init__(self) -> None:
        own = self.own
        if own.dim() != 1 or not own.is_floating_point():
            raise RobustnessError(f"the own vector must be a flat float tensor, got shape "
                                  f"{tuple(own.shape)} of {own.dtype}")
        if len(self.weights) != len(self.neighbours):
            raise RobustnessError(f"{len(self.neighbours)} neighbours but "
                                  f"{len(self.weights)} weights")
        for k, x in enumerate(self.neighbours):
            if x.shape != own.shape or x.dtype != own.dtype or x.device != own.device:
                raise RobustnessError(
                    f"neighbour {k}: {tuple(x.shape)} {x.dtype} on {x.device}, unlike the own "
                    f"vector's {tuple(own.shape)} {own.dtype} on {own.device}")
        for w in (self.own_weight, *self.weights):
            if not (math.isfinite(w) and w >= 0):
                raise RobustnessError(f"a mixing weight must be finite and >= 0, got {w}")

    @classmethod
    def uniform(cls, own: torch.Tensor, neighbours: Iterable[torch.Tensor]) -> Neighbourhood:
        """Every member weighted 1 / (1 + |N_i|): the plain average's row."""
        them = tuple(neighbours)
        w = 1.0 / (1 + len(them))
        return cls(own, them, (w,) * len(them), w)

    @property
    def size(self) -> int:
        """n: the node and its neighbours."""
        return 1 + len(self.neighbours)

    @property
    def members(self) -> tuple[torch.Tensor, ...]:
        """The own vector first, then the neighbours': the order ties are broken in."""
        return (self.own, *self.neighbours)


def from_row(weights: Mapping[int, float], me: int, own: torch.Tensor,
             theirs: Mapping[int, torch.Tensor]) -> Neighbourhood:
    """The neighbourhood of the row `weights` (j -> W_ij, `me` included) by ascending j.

    A neighbour whose vector is missing (it died this round) is left out and its weight goes
    to the node itself, as `mix` counts it with the node's own tensor; a vector on another
    device is moved to the own vector's."""
    neighbours, kept, own_weight = [], [], 0.0
    for j in sorted(weights):
        if j != me and j in theirs:
            x = theirs[j]
            neighbours.append(x if x.device == own.device else x.to(own.device))
            kept.append(weights[j])
        else:
            own_weight += weights[j]
    return Neighbourhood(own, tuple(neighbours), tuple(kept), own_weight)


def without_non_finite(hood: Neighbourhood) -> tuple[Neighbourhood, tuple[int, ...]]:
    """The neighbourhood without the neighbours whose vector holds a NaN or an infinity
    (their weight goes to the node itself), and their positions.

    A NaN is a well-formed float32 on the wire, and one of them would poison every rule's
    arithmetic (a NaN norm clips nothing; sorting puts it last but a mean adds it), so an
    honest node drops such a vector before it aggregates."""
    dropped = tuple(k for k, x in enumerate(hood.neighbours) if not bool(x.isfinite().all()))
    if not dropped:
        return hood, ()
    keep = [k for k in range(len(hood.neighbours)) if k not in dropped]
    moved = sum(hood.weights[k] for k in dropped)
    return Neighbourhood(hood.own, tuple(hood.neighbours[k] for k in keep),
                         tuple(hood.weights[k] for k in keep), hood.own_weight + moved), dropped


def ordered_sum(terms: Iterable[tuple[float, torch.Tensor]], like: torch.Tensor) -> torch.Tensor:
    """sum_k w_k v_k, from zeros, one term after the other in the order given."""
    acc = torch.zeros_like(like)
    for w, v in terms:
        acc.add_(v, alpha=w)
    return acc


def ordered_mean(rows: Iterable[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """The plain mean of `rows`, summed in their order."""
    acc = torch.zeros_like(like)
    count = 0
    for v in rows:
        acc.add_(v)
        count += 1
    if count == 0:
        raise RobustnessError("the mean of no vectors")
    return acc.div_(count)
