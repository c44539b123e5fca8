"""Clipping rules, which keep gossip's mixing weights and bound what any one neighbour can move
the node by: ClippedGossip with a fixed or adaptive radius (He, Karimireddy, Jaggi 2022) and
self-centred clipping iterated from the node's own model (SCClip; Karimireddy, He, Jaggi 2021's
centred clipping with the node's model as the centre).

    CLIP(z, tau) = min(1, tau / ||z||) z
    ClippedGossip: x_i <- x_i + sum_{j in N_i} W_ij CLIP(x_j - x_i, tau_i)

A neighbour can therefore move x_i by at most W_ij tau_i, whatever it sends. The rule does not
read W_ii: with a row summing to one, x_i + sum_j W_ij (x_j - x_i) is gossip's sum_j W_ij x_j,
which is what ClippedGossip is with an infinite radius. Norms are taken in float64, so that
the float32 vectors of an attacker cannot overflow them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from protocols.robust.errors import RobustnessError
from protocols.robust.neighbourhood import Neighbourhood


def _norm(z: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(z, dtype=torch.float64))


def _check_radius(tau: float) -> None:
    if math.isnan(tau) or tau < 0:
        raise RobustnessError(f"a clipping radius must be >= 0 (inf: no clipping), got {tau}")


def _clip_(z: torch.Tensor, tau: float) -> bool:
    """CLIP(z, tau) in place: z scaled down to norm tau, or left alone when ||z|| <= tau;
    whether it was scaled."""
    norm = _norm(z)
    if norm <= tau:
        return False
    z.mul_(tau / norm)
    return True


def clip(z: torch.Tensor, tau: float) -> torch.Tensor:
    """min(1, tau / ||z||) z, as a new tensor."""
    _check_radius(tau)
    out = z.clone()
    _clip_(out, tau)
    return out


def _clipped_step(centre: torch.Tensor, terms: Iterable[tuple[float, torch.Tensor]],
                  tau: float) -> tuple[torch.Tensor, int]:
    """centre + sum_k w_k CLIP(v_k - centre, tau), one term after the other (each difference
    is a fresh tensor, clipped in place: one model-sized temporary per term), and how many
    terms were clipped."""
    acc, clipped = centre.clone(), 0
    for w, v in terms:
        z = v - centre
        clipped += _clip_(z, tau)
        acc.add_(z, alpha=w)
    return acc, clipped


@dataclass(frozen=True)
class Clipped:
    """A clipping rule's result with what it did: how many terms it clipped (in its last
    iteration) and the radius, so that a run can show where a defence acted."""

    vector: torch.Tensor
    clipped: int
    radius: float


def clipped_gossip(hood: Neighbourhood, tau: float) -> torch.Tensor:
    """x_i + sum_j W_ij CLIP(x_j - x_i, tau) (He, Karimireddy, Jaggi 2022, ClippedGossip);
    `tau` fixed, or this round's `adaptive_radius`."""
    return clipped_gossip_reported(hood, tau).vector


def clipped_gossip_reported(hood: Neighbourhood, tau: float) -> Clipped:
    """`clipped_gossip`, with the number of neighbours it clipped."""
    _check_radius(tau)
    vector, clipped = _clipped_step(hood.own, zip(hood.weights, hood.neighbours, strict=True),
                                    tau)
    return Clipped(vector, clipped, tau)


def adaptive_radius(hood: Neighbourhood, delta: float) -> float:
    """ClippedGossip's adaptive radius: the largest tau that clips the farthest neighbours
    whose weights sum to at least `delta`, the weight the node assumes Byzantine (delta_i).

    The neighbours are ranked by ||x_j - x_i||, farthest first (ties: the earlier neighbour
    first); the smallest prefix of that ranking whose weights reach delta is clipped, to the
    distance of the next neighbour (0 when every neighbour is in the prefix). delta = 0 clips
    nothing (the farthest distance); one Byzantine neighbour of equal weight is clipped to the
    second farthest distance."""
    if not (math.isfinite(delta) and 0 <= delta <= 1):
        raise RobustnessError(f"ClippedGossip: delta, the Byzantine weight assumed, must be in "
                              f"[0, 1], got {delta}")
    distances = [_norm(x - hood.own) for x in hood.neighbours]
    ranking = sorted(range(len(distances)), key=lambda k: (-distances[k], k))
    if not ranking:
        return 0.0
    if delta == 0:
        return distances[ranking[0]]
    clipped = 0.0
    for position, k in enumerate(ranking):
        clipped += hood.weights[k]
        if clipped >= delta:
            rest = ranking[position + 1:]
            return distances[rest[0]] if rest else 0.0
    return 0.0


def self_centred_clipping(hood: Neighbourhood, tau: float, iterations: int = 1) -> torch.Tensor:
    """v_0 = x_i, v_{l+1} = v_l + sum_{k in {i} u N_i} W_ik CLIP(x_k - v_l, tau), L times; the
    result v_L.

    SCClip is the name of ClippedGossip's fixed-radius rule in the first version of He et
    al.'s paper, sum_j W_ij (x_i + CLIP(x_j - x_i, tau)); with one iteration and a row summing
    to one this is that rule. Further iterations re-centre the clipping at the running
    aggregate, as Karimireddy et al.'s centred clipping does (there the centre starts at the
    previous round's aggregate; here at the node's own model), and then the node's own model
    is clipped like the others."""
    return self_centred_clipping_reported(hood, tau, iterations).vector


def self_centred_clipping_reported(hood: Neighbourhood, tau: float,
                                   iterations: int = 1) -> Clipped:
    """`self_centred_clipping`, with the number of members (the node's own model among them)
    its last iteration clipped."""
    _check_radius(tau)
    if iterations < 1:
        raise RobustnessError(f"self-centred clipping: iterations must be >= 1, got "
                              f"{iterations}")
    terms = list(zip((hood.own_weight, *hood.weights), hood.members, strict=True))
    v, clipped = hood.own, 0
    for _ in range(iterations):
        v, clipped = _clipped_step(v, terms, tau)
    return Clipped(v, clipped, tau)
