"""A protocol's `hyper:` block as a typed model that the protocol's spec declares.

Every protocol declares `Hyper`, a subclass of `ProtocolHyper`: its fields are the protocol's
settings, with their defaults (declared on the model and nowhere else) and their checks. The
launcher validates the user's `hyper` against it before any node starts (an unknown key is exit
2 with the closest known key), and the node reads the same model, typed, as `self.hyper`. The
models a protocol's `Hyper` is made of live here, without torch, because the launcher reads
them (protocols/declaration.py).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, field_validator

from dfl_config.section import Count, NonNegativeInt, Positive, Section
from dfl_node.settings.runtime import RuntimeHyper

B_FP = 32  # bits of a float32 value on the wire


class ProtocolHyper(RuntimeHyper):
    """Base of every protocol's `Hyper`: the runtime keys (torch_threads, deterministic) plus
    the protocol's own fields.

    Every float of it, nested sections included, must survive float32: the tensors a
    hyper-parameter scales are float32, so `lr: 1e300` would start the mesh and then fail in
    every node's first step (torch refuses the overflow), and `lr: 1e-50` would train with 0.
    The check is on the type, not on a list of names, so every protocol's fields, a plugin's
    included, have it."""

    def step_size_law(self) -> str | None:
        """The step size as the paper writes it where it varies over rounds (None: a constant
        `lr`, or none): a reproduction's deviation table shows the law, not the bare `lr`."""
        return None

    @field_validator("*")
    @classmethod
    def _fits_float32(cls, value: Any) -> Any:
        problem = float32_problem(value)
        if problem:
            raise ValueError(problem)
        return value


def _float32_of_bits(bits: int) -> float:
    """The float32 whose IEEE 754 bit pattern is `bits` (numpy's finfo without numpy, which the
    launcher's checks of a request do not otherwise import)."""
    value: float = struct.unpack("<f", struct.pack("<I", bits))[0]
    return value


FLOAT32_MAX = _float32_of_bits(0x7F7FFFFF)  # np.finfo(np.float32).max
FLOAT32_LEAST = _float32_of_bits(0x00000001)  # np.finfo(np.float32).smallest_subnormal


def float32_problem(value: Any, where: str = "") -> str:
    """Why `value` (a float, or a section, mapping or sequence holding floats) would not be
    itself in a float32 tensor ("" if it would); `where` is its path inside the field."""
    if isinstance(value, BaseModel):
        value = dict(value)
    if isinstance(value, Mapping):
        items: Iterable[tuple[str, Any]] = ((f"{where}.{k}" if where else str(k), v)
                                            for k, v in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    else:
        if not isinstance(value, float) or not math.isfinite(value):
            return ""
        prefix = f"{where}: " if where else ""
        if abs(value) > FLOAT32_MAX:
            return f"{prefix}must fit float32, the type of the tensors it reaches " \
                   f"(|x| <= {FLOAT32_MAX:.8g}), got {value!r}"
        if 0 < abs(value) < FLOAT32_LEAST:
            return f"{prefix}must not vanish in float32, the type of the tensors it reaches " \
                   f"(0 or |x| >= {FLOAT32_LEAST:.3g}), got {value!r}"
        return ""
    return next((found for key, item in items if (found := float32_problem(item, key))), "")


class TrainingHyper(ProtocolHyper):
    """The settings of plain mini-batch SGD (protocols/sdk/learning.py's LocalSGD)."""

    lr: Positive = 0.1
    """Step size."""
    batch_size: Count = 32
    """Mini-batch size (capped at the shard's size)."""


class DenseAccounting(Section):
    """Formula constants of a dense float message (docs/protocols/dmfl-sq.md#a17)."""

    b_fp: NonNegativeInt = B_FP
    """Bits per value."""
    b_hdr: NonNegativeInt = 0
    """Header bits per message (0: omitted, as the q-FFL formula does)."""
