"""The radio link formulas: packet loss from distance and SNR, packets, retransmissions, airtime.

Why here and not in the clock: these are the physics a wireless researcher wants to read, check
and swap in one place (DSC paper Eq. 5; docs/protocols/dsc.md#link-model). A message of B
bytes is cut into
K = ceil(B / L_pkt) packets; a lost packet is retransmitted until delivered, so loss only costs
time. `expected` mode charges K / (1 - p) transmissions (Eq. 5 exactly); `sampled` draws each
packet's transmission count ~ Geometric(1 - p) from a stream fixed by (seed, frame, link), so
every node of a run draws the same numbers. One transmission lasts l_pkt = 8 L_pkt / bandwidth,
and a link's time is its propagation latency plus its transmissions' airtime.

Loss models (`loss_model`):
- `fixed`: p from the edge's `loss` attribute, else the link default `loss` (default 0);
- `outage`: Rayleigh block-fading outage per packet, mean SNR gamma = SNR_0 (d / d_0)^-beta,
  p = 1 - exp(-(2^R - 1) / gamma) with R the required spectral efficiency (bit/s/Hz);
- `ber`: BPSK over AWGN, p_b = Q(sqrt(2 gamma)), p = 1 - (1 - p_b)^(8 L_pkt).
p is clipped to [0, P_MAX] so that a hopeless link stays finite.

The options and their defaults are `LinkSettings` (dfl_node/settings/link.py, the `link:`
section).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dfl_node.settings.link import LinkSettings

if TYPE_CHECKING:
    import numpy as np

P_MAX = 0.999


def packets(message_bytes: int, packet_bytes: int) -> int:
    """K = ceil(B / L_pkt); an empty message is no packet at all."""
    return -(-message_bytes // packet_bytes)


def mean_snr(distance: float, cfg: LinkSettings, d0: float) -> float:
    """Linear mean SNR of a link of length `distance` (path loss with exponent beta)."""
    snr0 = 10.0 ** (cfg.snr0_db / 10.0)
    if distance <= 0:
        return math.inf
    return snr0 * (distance / d0) ** (-cfg.path_loss_exponent)


def loss_probability(distance: float, cfg: LinkSettings, d0: float) -> float:
    """Per-packet loss probability of a link of length `distance` under `cfg.loss_model`."""
    gamma = mean_snr(distance, cfg, d0)
    if cfg.loss_model == "outage":
        p = -math.expm1(-(2.0**cfg.spectral_efficiency - 1.0) / gamma)
    elif cfg.loss_model == "ber":
        bit_error = 0.5 * math.erfc(math.sqrt(gamma))  # Q(sqrt(2 gamma))
        p = -math.expm1(8 * cfg.packet_bytes * math.log1p(-bit_error))
    else:
        raise ValueError(f"loss_model {cfg.loss_model!r} does not depend on distance")
    return min(max(p, 0.0), P_MAX)


def expected_transmissions(n_packets: int, p: float) -> float:
    """Eq. 5: retransmit-until-delivered costs K / (1 - p) transmissions on average."""
    return n_packets / (1.0 - p)


def sampled_transmissions(n_packets: int, p: float, rng: np.random.Generator) -> int:
    """Sum of K Geometric(1 - p) draws: K successes plus the failures before them."""
    if n_packets == 0 or p == 0:
        return n_packets
    return n_packets + int(rng.negative_binomial(n_packets, 1.0 - p))

