"""The `link:` section: the per-link defaults and the radio model of the virtual clock.

The formulas that use these values live in dfl_node/netsim/radio.py; a topology edge's own
`latency_ms`, `bandwidth_mbps` or `loss` (and a node's `compute_ms`) overrides the default here.
"""

from __future__ import annotations

from typing import Literal

from dfl_config.section import Count, Fraction, NonNegative, Number, Positive, Section

Probability = Fraction
"""A per-packet loss probability: 1 would retransmit forever."""
LossModel = Literal["fixed", "outage", "ber"]
Retransmissions = Literal["expected", "sampled"]


class LinkSettings(Section):
    """The plan's `link` options (docs/protocols/dsc.md#link-model)."""

    latency_ms: NonNegative = 1.0
    """Propagation latency of a link, per message."""
    bandwidth_mbps: Positive = 100.0
    """Link bandwidth: one packet's airtime is 8 packet_bytes / bandwidth."""
    compute_ms: NonNegative = 10.0
    """A node's compute time per local step."""
    packet_bytes: Count = 1500
    """L_pkt: a message of B bytes is ceil(B / L_pkt) packets."""
    loss_model: LossModel = "fixed"
    """fixed: the edge's or this `loss`; outage, ber: from distance and SNR (needs positions)."""
    loss: Probability = 0.0
    """Per-packet loss probability of the `fixed` model."""
    snr0_db: Number = 20.0
    """SNR_0: the mean SNR at the reference distance d0, in dB."""
    d0: Positive | None = None
    """Reference distance; None: 0.1 x the deployment side (docs/protocols/dsc.md#a11)."""
    path_loss_exponent: Positive = 3.0
    """beta of the path loss (d / d0)^-beta."""
    spectral_efficiency: Positive = 2.0
    """R (bit/s/Hz) of the outage model: a packet is lost when log2(1 + SNR) < R."""
    retransmissions: Retransmissions = "expected"
    """expected: K / (1 - p) transmissions (Eq. 5); sampled: Geometric draws per packet."""

    @property
    def needs_positions(self) -> bool:
        return self.loss_model != "fixed"
