"""A message's tensors together with what the paper charges for it.

Accounting is the point of dfl-mesh, so it is not a duty a protocol may forget: whatever builds
a message (a compressor, or `dense` for plain float tensors) states its formula bits per
component beside the tensors, and every shape of `Exchange` charges them on every link the
message is sent on. A message that states no bits is refused at the send (`require_bits`): a
forgotten charge is an error, never a silent zero in `bits_per_client`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from protocols.hyper import DenseAccounting


@dataclass(frozen=True)
class Payload:
    tensors: Mapping[str, torch.Tensor]
    bits: Mapping[str, int] = field(default_factory=dict)
    """Formula bits of this message on one directed link, per component (values, header...)."""

    @property
    def total_bits(self) -> int:
        return sum(self.bits.values())

    @property
    def nbytes(self) -> int:
        """What the tensors occupy on the wire (the payload, without framing)."""
        return sum(t.numel() * t.element_size() for t in self.tensors.values())


def dense(tensors: Mapping[str, torch.Tensor], acc: DenseAccounting | None = None) -> Payload:
    """Plain float tensors: every value costs `b_fp` bits, the message one header."""
    acc = acc or DenseAccounting()
    values = sum(t.numel() for t in tensors.values())
    return Payload(tensors, {"values": values * acc.b_fp, "header": acc.b_hdr})


def require_bits(payload: Payload, phase: str) -> None:
    """ValueError unless the payload carries tensors and states a positive number of bits."""
    if not payload.tensors or payload.total_bits <= 0:
        raise ValueError(
            f"phase {phase!r}: a message must carry tensors and state its formula bits, got "
            f"tensors {sorted(payload.tensors)} and bits {dict(payload.bits)}; build it with "
            "dense(...) or a compressor's payload, or send nothing (Exchange.optional)")
