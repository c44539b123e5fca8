"""Bits of the DMFL-SQ paper's baselines, as its accounting section counts them.

The paper states only q-FFL's formula (B_client = 2 T P b_fp, b_fp = 32: uplink plus downlink).
For the decentralized baselines we apply the same unicast-equivalent rule as eq. (18), one charge
per directed link and round (docs/protocols/dmfl-sq.md#a17):

    D-PSGD     deg_i * P * 32          one dense float32 model per neighbour
    DSGT       deg_i * 2 * P * 32      the mixed-model message and the tracker
    CHOCO-SGD  eq. (18) with chi = 1, k = ceil(0.1 P), b_q = 8, b_scale = 32, b_hdr = 32
    q-FFL      P * 32 up and P * 32 down per client and round

Dense messages carry no positions and no scale; their header is omitted (b_hdr = 0), as in the
q-FFL formula, unless a run sets `accounting.b_hdr`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

B_FP = 32


@dataclass(frozen=True)
class DenseAccounting:
    """Constants for dense float messages: bits per value and per message header."""

    b_fp: int = B_FP
    b_hdr: int = 0

    @classmethod
    def from_mapping(cls, given: Mapping[str, Any] | None) -> DenseAccounting:
        given = dict(given or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ValueError(f"accounting: unknown keys {unknown} (known: {sorted(known)})")
        for name, value in given.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"accounting.{name}: must be a non-negative integer, "
                                 f"got {value!r}")
        return cls(**given)


def dense_link_bits(vectors: int, size: int, acc: DenseAccounting) -> dict[str, int]:
    """One directed link, one round: `vectors` dense vectors of P values in one message."""
    return {"values": vectors * size * acc.b_fp, "header": acc.b_hdr}
