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
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

P_MAX = 0.999
LOSS_MODELS = ("fixed", "outage", "ber")
RETX_MODES = ("expected", "sampled")


@dataclass(frozen=True)
class RadioConfig:
    """The link options of the plan (`link:` in the config), checked on construction."""

    latency_ms: float = 1.0
    bandwidth_mbps: float = 100.0
    compute_ms: float = 10.0
    packet_bytes: int = 1500
    loss_model: str = "fixed"
    loss: float = 0.0
    snr0_db: float = 20.0
    d0: float | None = None  # None: 0.1 x the deployment side (docs/protocols/dsc.md#a11)
    path_loss_exponent: float = 3.0
    spectral_efficiency: float = 2.0
    retransmissions: str = "expected"

    def __post_init__(self) -> None:
        for name in ("latency_ms", "compute_ms", "loss"):
            _require(getattr(self, name) >= 0, f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("bandwidth_mbps", "path_loss_exponent", "spectral_efficiency"):
            _require(getattr(self, name) > 0, f"{name} must be > 0, got {getattr(self, name)}")
        _require(self.loss < 1, f"loss must be < 1, got {self.loss}")
        _require(type(self.packet_bytes) is int and self.packet_bytes > 0,
                 f"packet_bytes must be an integer > 0, got {self.packet_bytes!r}")
        _require(self.loss_model in LOSS_MODELS,
                 f"loss_model must be one of {', '.join(LOSS_MODELS)}, got {self.loss_model!r}")
        _require(self.retransmissions in RETX_MODES,
                 f"retransmissions must be one of {', '.join(RETX_MODES)}, "
                 f"got {self.retransmissions!r}")
        _require(self.d0 is None or self.d0 > 0, f"d0 must be > 0, got {self.d0}")

    @classmethod
    def from_dict(cls, link: Mapping[str, Any]) -> RadioConfig:
        """ValueError (one line) on an unknown key or a value of the wrong type or range."""
        known = cls.__dataclass_fields__
        unknown = sorted(set(link) - set(known))
        _require(not unknown, f"unknown key(s) {unknown}")
        try:
            return cls(**link)
        except TypeError as exc:
            raise ValueError(f"bad value: {exc}") from None

    @property
    def packet_seconds(self) -> float:
        """l_pkt: the airtime of one packet transmission at the link default bandwidth."""
        return 8.0 * self.packet_bytes / (self.bandwidth_mbps * 1e6)

    @property
    def needs_positions(self) -> bool:
        return self.loss_model != "fixed"


def packets(message_bytes: int, packet_bytes: int) -> int:
    """K = ceil(B / L_pkt); an empty message is no packet at all."""
    return -(-message_bytes // packet_bytes)


def mean_snr(distance: float, cfg: RadioConfig, d0: float) -> float:
    """Linear mean SNR of a link of length `distance` (path loss with exponent beta)."""
    snr0 = 10.0 ** (cfg.snr0_db / 10.0)
    if distance <= 0:
        return math.inf
    return snr0 * (distance / d0) ** (-cfg.path_loss_exponent)


def loss_probability(distance: float, cfg: RadioConfig, d0: float) -> float:
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


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)
