"""Eq. (18) of the DMFL-SQ paper for one compressed message: its constants and its bits.

Apart from the compressors (compressors.py) because a protocol's settings declare these
constants, and the launcher reads the settings without torch (protocols/declaration.py).
"""

from __future__ import annotations

from dfl_config.section import Flag, NonNegativeInt, Section
from protocols.toolkit.index_bits import ceil_log2

MAX_BITS = 16  # the most bits per value a quantiser packs


class MessageAccounting(Section):
    """The constants of eq. (18) for one compressed message (docs/protocols/dmfl-sq.md)."""

    b_q: NonNegativeInt | None = None
    """Bits per value; none: the compressor's own (the quantiser's bits, 32 without one)."""
    b_scale: NonNegativeInt = 32
    """Bits of the scale, charged only when the values are quantised."""
    b_hdr: NonNegativeInt = 32
    """Header bits per message."""
    b_trig: NonNegativeInt = 0
    """Trigger bits per link and round, fired or silent (0: silence is free, A13)."""
    dense_skip_mask: Flag = False
    """Drop the P-bit mask when every coordinate is sent (k = P), which the literal formula
    still charges (A15)."""


def message_bits(acc: MessageAccounting, k: int, size: int, *, value_bits: int, sparse: bool,
                 quantized: bool) -> dict[str, int]:
    """Eq. (18)'s bracket for one message of k entries out of P on one directed link.

    values = k b_q; positions = min(k ceil(log2 P), P), none for a dense message (all P values
    in order) or an empty one; scale = b_scale if the values are quantised, also for k = 0 (the
    formula charges it whenever the trigger fires); the header; the trigger term.
    """
    b_q = value_bits if acc.b_q is None else acc.b_q
    positions = 0
    if sparse and k > 0 and not (acc.dense_skip_mask and k >= size):
        positions = min(k * ceil_log2(size), size)
    return {"values": k * b_q, "positions": positions,
            "scale": acc.b_scale if quantized else 0, "header": acc.b_hdr,
            "trigger": acc.b_trig}
