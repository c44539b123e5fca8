"""Model poisoning: what an adversarial node sends in place of the vector it would have sent.

Each attack maps honest vectors to a malicious one and leaves the choice of space to its
caller: applied to the model a gossip node sends (ClippedGossip's experiments flip the sign of
the model itself) or to its update (the federated papers' gradients). The attacks that need
the honest vectors (ALIE, IPM, dissensus) take those the adversary can see, its neighbours'
models, passed in a fixed order. Randomness comes only from the `torch.Generator` passed in
(a stream of the run's seed, checkpointed with the node), so an attack is a pure function.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from protocols.robust.alie_quantile import alie_z
from protocols.robust.errors import RobustnessError
from protocols.robust.neighbourhood import ordered_mean, ordered_sum

__all__ = ["alie", "alie_z", "dissensus", "gaussian", "ipm", "scaled", "sign_flip"]


def sign_flip(v: torch.Tensor) -> torch.Tensor:
    """-v (the bit-flipping attack of the robust-aggregation literature)."""
    return v.neg()


def scaled(v: torch.Tensor, factor: float) -> torch.Tensor:
    """factor * v: a boosted update (factor > 1) or a reversed, boosted one (factor < 0)."""
    if not math.isfinite(factor):
        raise RobustnessError(f"scaled attack: the factor must be finite, got {factor}")
    return v.mul(factor)


def gaussian(centre: torch.Tensor, std: float, generator: torch.Generator) -> torch.Tensor:
    """centre + std * N(0, I), drawn on the CPU from `generator` (so its bits do not depend on
    the device) and moved to the centre's device. Blanchard et al.'s Gaussian Byzantine worker
    is a centre of zeros."""
    if not (math.isfinite(std) and std >= 0):
        raise RobustnessError(f"Gaussian attack: std must be finite and >= 0, got {std}")
    noise = torch.randn(centre.shape, generator=generator, dtype=centre.dtype, device="cpu")
    return centre + noise.to(centre.device).mul_(std)


def _mean_and_std(honest: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The coordinate-wise mean and sample standard deviation (divisor k - 1), summed in the
    order given."""
    if len(honest) < 2:
        raise RobustnessError(f"ALIE needs at least 2 honest vectors to estimate a standard "
                              f"deviation, got {len(honest)}")
    mu = ordered_mean(honest, honest[0])
    var = ordered_sum(((1.0, (x - mu).square()) for x in honest), mu).div_(len(honest) - 1)
    return mu, var.sqrt_()


def alie(honest: Sequence[torch.Tensor], z: float) -> torch.Tensor:
    """mu - z sigma, coordinate-wise over the honest vectors (Baruch et al. 2019):
    a shift small enough to stay inside the spread that order statistics accept."""
    if not math.isfinite(z):
        raise RobustnessError(f"ALIE: z must be finite, got {z}")
    mu, sigma = _mean_and_std(honest)
    return mu.sub_(sigma, alpha=z)


def ipm(honest: Sequence[torch.Tensor], epsilon: float) -> torch.Tensor:
    """-epsilon times the honest vectors' mean (Xie, Koyejo, Gupta 2020, inner-product
    manipulation): its inner product with the true mean is negative."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise RobustnessError(f"IPM: epsilon must be finite and > 0, got {epsilon}")
    if not honest:
        raise RobustnessError("IPM needs at least one honest vector")
    return ordered_mean(honest, honest[0]).mul_(-epsilon)


def dissensus(target: torch.Tensor, honest: Sequence[torch.Tensor],
              honest_weights: Sequence[float], byzantine_weight: float,
              epsilon: float) -> torch.Tensor:
    """x_i - epsilon sum_{j honest} W_ij (x_j - x_i) / delta_i: ClippedGossip's own attack
    (He et al. 2022), sent to target node i by each of its Byzantine neighbours (of total
    weight delta_i), pushing x_i away from its honest neighbours' consensus."""
    if len(honest) != len(honest_weights):
        raise RobustnessError(f"dissensus: {len(honest)} honest vectors but "
                              f"{len(honest_weights)} weights")
    if not (math.isfinite(byzantine_weight) and byzantine_weight > 0):
        raise RobustnessError(f"dissensus: the Byzantine weight delta_i must be > 0, got "
                              f"{byzantine_weight}")
    pull = ordered_sum(zip(honest_weights, (x - target for x in honest), strict=True), target)
    return target - pull.mul_(epsilon / byzantine_weight)
