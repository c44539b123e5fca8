"""Compressors C(v) for model-copy innovations, their wire form and the paper's bit count.

DMFL-SQ sends c = C(s) with C = Q_b o Top_k (paper, Sec. VI: "Q_8 is the support-preserving
uniform 8-bit quantizer") and both ends add c to their copy of the sender's model, so the sender's
copy must equal every receiver's copy bit for bit (the common-copy property, Appendix B-B). That
is why one method, `decompress`, turns wire tensors into c on both sides: the sender applies it
to its own `Compressed.tensors`, a receiver to the received ones, and the result is a pure,
deterministic function of those bytes (numpy float64 element-wise arithmetic, cast to float32).

Wire form (the tensors of one message; 1-D, names fixed):
- dense (`Identity`): "values" float32[P];
- sparse (every other compressor): "k" int32[1] (the count k_i^t; 32 bits, the size of the
  paper's b_hdr), the positions in one of the codings of `compress_positions` (absent when k = 0:
  coding "none"), then the values: "values" float32[k] unquantised, or "scale" float32[1] (one
  scale per message, b_scale = 32) and "codes" with each code in exactly b bits, packed.
A sparse message carries only nonzero entries, so k is the paper's "number of nonzero
coordinates transmitted" and zeros stay zero under every compressor.

`decompress` and `validate` treat their input as hostile: exact names, dtypes and lengths,
positions < P and strictly increasing, zero padding bits, k within the compressor's budget, a
finite positive scale, finite nonzero float values; anything else raises `CompressionError`.

Bits as the paper counts them (eq. 18): a message states its own, `Compressed.payload(acc)`,
per component (values, positions, scale, header, trigger) under the accounting constants `acc`,
so a protocol charges what its compressor produced and never recomputes it. Position coding on
the wire never exceeds the formula's min(k ceil(log2 P), P) bits rounded up to the byte (see
`compress_positions` for what it achieves beyond that).

The `compressor:` setting that builds one is a typed spec (protocols/toolkit/compressor_configs.py).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import torch

from protocols.sdk.payload import Payload
from protocols.toolkit.accounting import MAX_BITS, MessageAccounting, message_bits
from protocols.toolkit.positions import (
    POSITION_NAMES,
    CompressionError,
    decode_positions,
    encode_positions,
    pack_uint,
    position_coding_of,
    unpack_uint,
)

__all__ = [
    "Composed",
    "Compressed",
    "CompressionError",
    "Compressor",
    "Identity",
    "Quantizer",
    "RandK",
    "Sparsifier",
    "TopK",
    "Uniform",
    "ValueCoder",
]

WireTensors = Mapping[str, torch.Tensor | np.ndarray]

# Every tensor name a message may hold, with its dtype; all are 1-D.
WIRE_DTYPES = {
    "k": "int32",
    "values": "float32",
    "scale": "float32",
    "codes": "uint8",
    **{name: "uint8" for names in POSITION_NAMES.values() for name in names},
}
MAX_SIZE = np.iinfo(np.int32).max  # k travels as int32
ROUNDINGS = ("nearest", "stochastic")
FLOAT_BITS = 32  # a value that travels as float32


@dataclass(frozen=True)
class Compressed:
    """One compressed message: its wire tensors and what the bit formula needs to know."""

    tensors: dict[str, np.ndarray]  # the wire form
    k: int  # entries transmitted: k_i^t (all P for a dense message)
    size: int  # P
    position_coding: str  # "bitmap" | "delta" | "index" | "dense" | "none" (k = 0)
    quantized: bool = False  # values are b-bit codes with one scale
    value_bits: int = FLOAT_BITS  # bits of one value as the formula counts it by default

    @property
    def payload_bytes(self) -> int:
        return sum(array.nbytes for array in self.tensors.values())

    @property
    def position_bytes(self) -> int:
        names = POSITION_NAMES.get(self.position_coding, ())
        return sum(self.tensors[name].nbytes for name in names)

    def payload(self, acc: MessageAccounting) -> Payload:
        """The message with its formula bits on one link (eq. 18's bracket, chi = 1)."""
        bits = message_bits(acc, self.k, self.size, value_bits=self.value_bits,
                            sparse=self.position_coding != "dense", quantized=self.quantized)
        return Payload({name: torch.from_numpy(a) for name, a in self.tensors.items()}, bits)


class Compressor(ABC):
    """compress(v) -> wire tensors; decompress(tensors, P) -> C(v), the same on every node."""

    sparse: ClassVar[bool] = True  # a message names its positions (not all P values in order)

    @abstractmethod
    def compress(self, v: torch.Tensor, gen: torch.Generator | None = None) -> Compressed:
        """Compress a flat float32 vector with finite entries."""

    @abstractmethod
    def _parse(
        self, arrays: dict[str, np.ndarray], size: int
    ) -> tuple[np.ndarray | None, np.ndarray]:
        """(positions or None for all P, float32 values), after validating everything."""

    @abstractmethod
    def max_k(self, size: int) -> int:
        """The most entries a message for a vector of `size` may carry (checked on receipt)."""

    @property
    @abstractmethod
    def quantized(self) -> bool:
        """Whether values travel as codes with a scale."""

    @property
    @abstractmethod
    def value_bits(self) -> int:
        """Bits of one value as the formula counts it (b_q unless the accounting sets it)."""

    @property
    def wire_dtypes(self) -> Mapping[str, str]:
        """Every tensor name a message may hold, with its dtype."""
        return WIRE_DTYPES

    def largest_bits(self, size: int, acc: MessageAccounting) -> int:
        """The formula bits of the largest message for a vector of `size`: protocols whose
        paper times the worst case charge the virtual clock this (the wire never exceeds it,
        up to byte rounding)."""
        return sum(message_bits(acc, self.max_k(size), size, value_bits=self.value_bits,
                                sparse=self.sparse, quantized=self.quantized).values())

    def validate(self, tensors: WireTensors, size: int) -> None:
        """Raise CompressionError unless `tensors` is a well-formed message for a vector of P."""
        self._parse(_wire_arrays(tensors, self.wire_dtypes), size)

    def decompress(self, tensors: WireTensors, size: int) -> torch.Tensor:
        """C(v) as a fresh flat float32 tensor of length P (validated first)."""
        positions, values = self._parse(_wire_arrays(tensors, self.wire_dtypes), size)
        out = torch.zeros(size, dtype=torch.float32)
        if positions is None:
            out.numpy()[:] = values
        else:
            out.numpy()[positions] = values
        return out


@dataclass(frozen=True)
class Identity(Compressor):
    """No compression: the dense float32 vector, k = P."""

    sparse = False
    quantized = False
    value_bits = FLOAT_BITS

    def max_k(self, size: int) -> int:
        return size

    def compress(self, v: torch.Tensor, gen: torch.Generator | None = None) -> Compressed:
        array = _input_array(v)
        return Compressed({"values": array.copy()}, array.size, array.size, "dense")

    def _parse(self, arrays: dict[str, np.ndarray], size: int) -> tuple[None, np.ndarray]:
        _require_names(arrays, {"values"})
        values = arrays["values"]
        if values.size != size or not np.isfinite(values).all():
            raise CompressionError(f"values: expected {size} finite float32 entries")
        return None, values


class ValueCoder(ABC):
    """How the k selected (nonzero) entries travel: float32, or a quantiser's codes."""

    value_dtypes: ClassVar[Mapping[str, str]]  # its tensors' names and dtypes (all 1-D)
    scaled: ClassVar[bool]  # codes with one scale per message (the formula's scale term)

    @property
    @abstractmethod
    def code_bits(self) -> int:
        """Bits of one value as the formula counts it (b_q)."""

    @abstractmethod
    def encode_values(self, values: np.ndarray, gen: torch.Generator | None) -> dict[str, Any]:
        """Wire tensors for these nonzero float32 values."""

    @abstractmethod
    def decode_values(self, arrays: Mapping[str, np.ndarray], k: int) -> np.ndarray:
        """The k float32 values, validated."""


class _Float32Values(ValueCoder):
    value_dtypes: ClassVar[Mapping[str, str]] = {"values": "float32"}
    scaled = False
    code_bits = FLOAT_BITS

    def encode_values(self, values: np.ndarray, gen: torch.Generator | None) -> dict[str, Any]:
        return {"values": values}

    def decode_values(self, arrays: Mapping[str, np.ndarray], k: int) -> np.ndarray:
        values = arrays["values"]
        if values.size != k or not (np.isfinite(values).all() and values.all()):
            raise CompressionError(f"values: expected {k} finite nonzero float32 entries")
        return values


FLOAT32_VALUES = _Float32Values()


class SparseCompressor(Compressor):
    """A support (sorted positions of nonzero entries) plus a coding of the values there."""

    @abstractmethod
    def support(self, array: np.ndarray, gen: torch.Generator | None) -> np.ndarray:
        """Strictly increasing int64 positions of the entries to send; all nonzero in `array`."""

    @property
    @abstractmethod
    def coder(self) -> ValueCoder: ...

    @property
    def quantized(self) -> bool:
        return self.coder.scaled

    @property
    def value_bits(self) -> int:
        return self.coder.code_bits

    @property
    def wire_dtypes(self) -> Mapping[str, str]:
        return {**WIRE_DTYPES, **self.coder.value_dtypes}

    def compress(self, v: torch.Tensor, gen: torch.Generator | None = None) -> Compressed:
        array = _input_array(v)
        positions = self.support(array, gen)
        tensors: dict[str, np.ndarray] = {"k": np.array([positions.size], np.int32)}
        coding = "none"
        if positions.size:
            coding, position_tensors = encode_positions(positions, array.size)
            tensors |= position_tensors
        tensors |= self.coder.encode_values(array[positions], gen)
        return Compressed(tensors, int(positions.size), array.size, coding, self.quantized,
                          self.value_bits)

    def _parse(self, arrays: dict[str, np.ndarray], size: int) -> tuple[np.ndarray, np.ndarray]:
        if "k" not in arrays or arrays["k"].size != 1:
            raise CompressionError("k: expected one int32")
        k = int(arrays["k"][0])
        if not 0 <= k <= self.max_k(size):
            raise CompressionError(f"k={k} outside 0..{self.max_k(size)} for P={size}")
        names = {"k", *self.coder.value_dtypes}
        if k:
            names |= set(POSITION_NAMES[position_coding_of(arrays)])
        _require_names(arrays, names)
        positions = decode_positions(arrays, k, size) if k else np.zeros(0, np.int64)
        return positions, self.coder.decode_values(arrays, k)


class Sparsifier(SparseCompressor):
    """Keeps some entries, sent as float32 (alone) or quantised (in `Composed`)."""

    @property
    def coder(self) -> ValueCoder:
        return FLOAT32_VALUES


class Quantizer(SparseCompressor, ValueCoder):
    """Codes values: every nonzero entry alone, or the sparsifier's entries in `Composed`."""

    def support(self, array: np.ndarray, gen: torch.Generator | None = None) -> np.ndarray:
        return np.flatnonzero(array)

    def max_k(self, size: int) -> int:
        return size

    @property
    def coder(self) -> ValueCoder:
        return self


@dataclass(frozen=True)
class _Budgeted(Sparsifier):
    """A sparsifier with a budget of k entries: `k`, or k = max(1, ceil(ratio P))."""

    ratio: float | None = None
    k: int | None = None

    def __post_init__(self) -> None:
        name = type(self).__name__
        if (self.ratio is None) == (self.k is None):
            raise ValueError(f"{name}: give exactly one of ratio and k")
        if self.ratio is not None and not (_is_real(self.ratio) and 0 < self.ratio <= 1):
            raise ValueError(f"{name}: ratio must be a number in (0, 1], got {self.ratio!r}")
        if self.k is not None and not (type(self.k) is int and self.k >= 1):
            raise ValueError(f"{name}: k must be an int >= 1, got {self.k!r}")

    def budget(self, size: int) -> int:
        """k for a vector of `size`; the ratio is read as the decimal written (repr), so that
        ratio 0.07 of P = 100 gives 7, not the 8 that binary rounding of 0.07 * 100 would."""
        if self.k is not None:
            return self.k
        assert self.ratio is not None  # __post_init__: exactly one of ratio and k is set
        return max(1, math.ceil(Fraction(repr(float(self.ratio))) * size))

    def max_k(self, size: int) -> int:
        return min(self.budget(size), size)


@dataclass(frozen=True)
class TopK(_Budgeted):
    """Top_k over the whole flattened vector: the k_i = min(k, nnz(v)) largest |v_j|.

    Ties are broken by position: of entries with equal magnitude the lower positions win. The
    k-th largest magnitude is found with np.partition and the selection is then a pure function
    of the values (torch.topk leaves the order of ties unspecified). Since it keeps the k
    largest magnitudes, ||Top_k(v)||^2 >= (k / P) ||v||^2 (paper, Sec. VI).
    """

    def support(self, array: np.ndarray, gen: torch.Generator | None = None) -> np.ndarray:
        nonzero = np.flatnonzero(array)
        k = self.max_k(array.size)
        if nonzero.size <= k:
            return nonzero
        magnitudes = np.abs(array)
        kth = np.partition(magnitudes, array.size - k)[array.size - k]  # > 0 as nnz > k
        chosen = magnitudes > kth
        ties = np.flatnonzero(magnitudes == kth)[: k - int(np.count_nonzero(chosen))]
        chosen[ties] = True  # the positions in order, as a sorted union would give them
        return np.flatnonzero(chosen)


@dataclass(frozen=True)
class RandK(_Budgeted):
    """Rand_k: k positions uniformly without replacement (torch.randperm on the given
    generator), of which the nonzero ones are sent. Unscaled (the contractive form, E||C(v)||^2
    = (k / P) ||v||^2), as compressed gossip methods use it."""

    def support(self, array: np.ndarray, gen: torch.Generator | None = None) -> np.ndarray:
        if gen is None:
            raise ValueError("RandK needs a torch.Generator")
        picked = torch.randperm(array.size, generator=gen)[: self.max_k(array.size)].numpy()
        picked.sort()
        return picked[array[picked] != 0]


@dataclass(frozen=True)
class Uniform(Quantizer):
    """Q_b: support-preserving uniform b-bit quantiser with one float32 scale per message.

    Only the nonzero entries are coded (zeros stay exactly zero). With s = max |u_j| over them,
    the grid is the 2^b levels -s + c * 2s / (2^b - 1), c = 0 .. 2^b - 1, so +/- s are exact.
    "nearest" rounds (u + s) / Delta to the nearest code (ties to even), hence every entry is
    within s / (2^b - 1) of the original, up to the final rounding to float32; "stochastic"
    rounds down or up with the probabilities that make it unbiased (uniforms drawn in float64
    from the given generator), within 2s / (2^b - 1). Dequantisation is
    s * ((2c - (2^b - 1)) / (2^b - 1)) in float64, then float32: symmetric and exact at the ends.
    """

    bits: int = 8
    rounding: str = "nearest"

    value_dtypes: ClassVar[Mapping[str, str]] = {"scale": "float32", "codes": "uint8"}
    scaled = True

    def __post_init__(self) -> None:
        if not (type(self.bits) is int and 1 <= self.bits <= MAX_BITS):
            raise ValueError(f"Uniform: bits must be an int in 1..{MAX_BITS}, got {self.bits!r}")
        if self.rounding not in ROUNDINGS:
            raise ValueError(f"Uniform: rounding must be one of {ROUNDINGS}, got {self.rounding!r}")

    @property
    def code_bits(self) -> int:
        return self.bits

    @property
    def levels(self) -> int:
        """The largest code, 2^b - 1."""
        return (1 << self.bits) - 1

    def encode_values(self, values: np.ndarray, gen: torch.Generator | None) -> dict[str, Any]:
        if values.size == 0:
            return {"scale": np.zeros(1, np.float32), "codes": np.zeros(0, np.uint8)}
        scale = np.abs(values).max()
        grid = (values.astype(np.float64) / float(scale) + 1.0) * (self.levels / 2)
        if self.rounding == "nearest":
            codes = np.rint(grid)
        elif gen is None:
            raise ValueError("Uniform(rounding='stochastic') needs a torch.Generator")
        else:
            uniforms = torch.rand(values.size, generator=gen, dtype=torch.float64).numpy()
            codes = np.floor(grid + uniforms)
        codes = np.clip(codes, 0, self.levels).astype(np.int64)
        return {"scale": np.array([scale], np.float32), "codes": pack_uint(codes, self.bits)}

    def decode_values(self, arrays: Mapping[str, np.ndarray], k: int) -> np.ndarray:
        scale = arrays["scale"]
        if scale.size != 1 or not np.isfinite(scale[0]) or (scale[0] > 0) != (k > 0):
            raise CompressionError("scale: expected one finite float32, > 0 iff k > 0 (else 0)")
        codes = unpack_uint(arrays["codes"], k, self.bits, "codes")
        unit = (2 * codes - self.levels) / self.levels
        return (float(scale[0]) * unit).astype(np.float32)


@dataclass(frozen=True)
class Composed(SparseCompressor):
    """Q_b(S(v)): the sparsifier's support, its values quantised (the paper's Q_8 o Top_k)."""

    sparsifier: Sparsifier
    quantizer: Quantizer

    def support(self, array: np.ndarray, gen: torch.Generator | None = None) -> np.ndarray:
        return self.sparsifier.support(array, gen)

    def max_k(self, size: int) -> int:
        return self.sparsifier.max_k(size)

    @property
    def coder(self) -> ValueCoder:
        return self.quantizer


def _is_real(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _input_array(v: torch.Tensor) -> np.ndarray:
    """The vector to compress as a 1-D float32 numpy view; finite entries only."""
    if not isinstance(v, torch.Tensor) or v.dtype != torch.float32 or v.dim() != 1:
        raise ValueError("compress expects a flat float32 torch.Tensor")
    if not 1 <= v.numel() <= MAX_SIZE:
        raise ValueError(f"compress expects 1 .. {MAX_SIZE} entries, got {v.numel()}")
    array = v.detach().to("cpu").numpy()
    if not np.isfinite(array).all():
        raise ValueError("cannot compress a vector with non-finite entries")
    return array


def _wire_arrays(tensors: WireTensors, dtypes: Mapping[str, str]) -> dict[str, np.ndarray]:
    """Numpy views of the tensors after checking every name, dtype and rank."""
    arrays = {}
    for name, value in tensors.items():
        array = value.detach().to("cpu").numpy() if isinstance(value, torch.Tensor) else value
        if not isinstance(array, np.ndarray) or name not in dtypes:
            raise CompressionError(f"unexpected tensor {name!r}")
        if array.dtype.name != dtypes[name] or array.ndim != 1:
            raise CompressionError(f"{name}: expected 1-D {dtypes[name]}")
        arrays[name] = array
    return arrays


def _require_names(arrays: Mapping[str, np.ndarray], names: set[str]) -> None:
    if set(arrays) != names:
        raise CompressionError(f"tensors {sorted(arrays)}, expected {sorted(names)}")
