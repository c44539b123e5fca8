"""Position coding for sparse messages: which of the P coordinates a message carries.

The paper charges min(k * ceil(log2 P), P) bits for the positions of the k transmitted entries
(eq. 18): an explicit index list or a P-bit mask, whichever is cheaper. On the wire a message
uses the cheapest, in bytes, of three codings of the strictly increasing positions:

- "bitmap": the P-bit mask, `np.packbits` (MSB first): ceil(P / 8) bytes;
- "index": every position in exactly L = ceil(log2 P) bits, packed: ceil(k L / 8) bytes;
- "delta": Golomb-Rice coding of the gaps g_m = p_m - p_{m-1} - 1 (p_{-1} = -1) with the
  parameter r = floor(log2(P // k)), computed by both ends from (k, P) so it is never sent. Each
  gap is split into a quotient g >> r, sent in unary (that many 0 bits, then a 1) in one stream
  "delta_q", and a remainder g mod 2^r, sent in r bits in another, "delta_r". Two streams keep
  encoding and decoding vectorised (numpy, no per-entry Python loop).

What it achieves against the formula: the first two alone give ceil(min(kL, P) / 8) bytes, i.e.
the formula's bits rounded up to the byte, so the wire is never larger than the formula (up to
that rounding). The delta coding costs about k (r + 1) + (P - k) / 2^r bits, close to
log2 binom(P, k), the entropy of a uniformly random support, when the support is spread out. For
the paper's CIFAR-10 CNN, P = 2,122,186 and k = 21,222 (ratio 0.01), the formula charges 466,884
bits (22 per position); the Top-k support of a Gaussian vector takes 21,500 bytes = 172.0 kbit
(8.1 bits per position, 37% of the formula; log2 binom(P, k) = 171.5 kbit). Clustered supports
fall back to the index list or the bitmap, so the bound above always holds.

Every decoder validates untrusted input fully before it returns: exact stream lengths, zero
padding bits, positions < P and strictly increasing (by construction of the gap codes, checked
directly for the index list), and a unary stream no longer than any valid one, so the decoding
cost is bounded by P and k. Any violation raises `CompressionError`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dfl_config.errors import DflMeshError
from protocols.toolkit.index_bits import ceil_log2


class CompressionError(ValueError, DflMeshError):
    """A compressed payload is malformed (wrong names, lengths, positions, codes or scale)."""


POSITION_NAMES: dict[str, tuple[str, ...]] = {
    "bitmap": ("bitmap",),
    "index": ("index",),
    "delta": ("delta_q", "delta_r"),
}


def rice_parameter(k: int, size: int) -> int:
    """floor(log2(P // k)): near-optimal for gaps of mean about P / k; both ends derive it."""
    return (size // k).bit_length() - 1


def pack_uint(values: np.ndarray, width: int) -> np.ndarray:
    """Non-negative ints < 2**width, each in exactly `width` bits, MSB first, zero-padded."""
    if width == 0:
        return np.zeros(0, np.uint8)
    if width == 8:
        return values.astype(np.uint8)
    nbytes = (width + 7) // 8
    big_endian = values.astype(">u8").view(np.uint8).reshape(-1, 8)[:, 8 - nbytes :]
    bits = np.unpackbits(big_endian, axis=1)[:, 8 * nbytes - width :]
    return np.packbits(bits.reshape(-1))


def unpack_uint(data: np.ndarray, count: int, width: int, name: str) -> np.ndarray:
    """Inverse of `pack_uint` (int64); the byte length and the padding bits must be exact."""
    _require_length(data, (count * width + 7) // 8, name)
    if width == 0:
        return np.zeros(count, np.int64)
    if width == 8:
        return data.astype(np.int64)
    bits = _unpack_exact(data, count * width, name).reshape(count, width)
    if width < 8:  # one byte a value: packbits pads each row's low end, shift it back
        return (np.packbits(bits, axis=1)[:, 0] >> (8 - width)).astype(np.int64)
    nbytes = (width + 7) // 8
    padded = np.zeros((count, 8 * nbytes), np.uint8)
    padded[:, 8 * nbytes - width :] = bits
    rows = np.packbits(padded, axis=1).astype(np.int64)
    return rows @ (np.int64(256) ** np.arange(nbytes - 1, -1, -1, dtype=np.int64))


def position_bytes(coding: str, positions: np.ndarray, size: int) -> int:
    """Wire bytes that `coding` needs for these positions (computed without encoding)."""
    k = len(positions)
    if coding == "bitmap":
        return (size + 7) // 8
    if coding == "index":
        return (k * ceil_log2(size) + 7) // 8
    r = rice_parameter(k, size)
    unary_bits = int((_gaps(positions) >> r).sum()) + k
    return (unary_bits + 7) // 8 + (k * r + 7) // 8


def encode_positions(positions: np.ndarray, size: int) -> tuple[str, dict[str, np.ndarray]]:
    """The cheapest coding of k >= 1 strictly increasing positions, and its tensors.

    Ties go to the first of bitmap, index, delta, so the choice is a pure function of the input.
    """
    coding = min(POSITION_NAMES, key=lambda name: position_bytes(name, positions, size))
    if coding == "bitmap":
        mask = np.zeros(size, np.uint8)
        mask[positions] = 1
        return coding, {"bitmap": np.packbits(mask)}
    if coding == "index":
        return coding, {"index": pack_uint(positions, ceil_log2(size))}
    r = rice_parameter(len(positions), size)
    gaps = _gaps(positions)
    quotients = gaps >> r
    unary = np.zeros(int(quotients.sum()) + len(gaps), np.uint8)
    unary[np.cumsum(quotients + 1) - 1] = 1  # each quotient's terminating 1 bit
    remainders = gaps & ((1 << r) - 1)
    return coding, {"delta_q": np.packbits(unary), "delta_r": pack_uint(remainders, r)}


def decode_positions(tensors: Mapping[str, np.ndarray], k: int, size: int) -> np.ndarray:
    """The k >= 1 strictly increasing positions (int64, all < size) in `tensors`; validated."""
    if not 1 <= k <= size:
        raise CompressionError(f"positions are coded for 1 <= k <= P = {size}, got k={k}")
    coding = position_coding_of(tensors)
    if coding == "bitmap":
        bits = _unpack_exact(tensors["bitmap"], size, "bitmap")
        positions = np.flatnonzero(bits)
        if len(positions) != k:
            raise CompressionError(f"bitmap has {len(positions)} ones, k is {k}")
        return positions.astype(np.int64)
    if coding == "index":
        positions = unpack_uint(tensors["index"], k, ceil_log2(size), "index")
        if k and (positions[-1] >= size or np.any(np.diff(positions) <= 0)):
            raise CompressionError(f"index: positions must be strictly increasing and < {size}")
        return positions
    return _decode_delta(tensors["delta_q"], tensors["delta_r"], k, size)


def position_coding_of(tensors: Mapping[str, np.ndarray]) -> str:
    """Which coding the tensors use, from their names (exactly one coding must be present)."""
    present = [name for name, names in POSITION_NAMES.items() if names[0] in tensors]
    if len(present) != 1:
        raise CompressionError(f"expected exactly one position coding of {list(POSITION_NAMES)}")
    return present[0]


def _decode_delta(unary: np.ndarray, remainders: np.ndarray, k: int, size: int) -> np.ndarray:
    r = rice_parameter(k, size)
    # Sum of quotients <= sum of gaps >> r <= (P - k) >> r: this bounds the unary stream, hence
    # the decode cost, and keeps every shifted gap far inside int64.
    max_unary_bits = ((size - k) >> r) + k
    if unary.size > (max_unary_bits + 7) // 8:
        raise CompressionError(f"delta_q: {unary.size} bytes exceeds the bound for k={k}")
    bits = np.unpackbits(unary)
    ends = np.flatnonzero(bits)
    if len(ends) != k:
        raise CompressionError(f"delta_q codes {len(ends)} gaps, k is {k}")
    if (int(ends[-1]) + 8) // 8 != unary.size:
        raise CompressionError("delta_q: trailing bytes after the last gap")
    quotients = np.diff(ends, prepend=-1) - 1
    gaps = (quotients << r) | unpack_uint(remainders, k, r, "delta_r")
    positions = np.cumsum(gaps + 1) - 1
    if positions[-1] >= size:
        raise CompressionError(f"delta: position {int(positions[-1])} >= P = {size}")
    return positions


def _gaps(positions: np.ndarray) -> np.ndarray:
    return np.diff(positions.astype(np.int64), prepend=-1) - 1


def _require_length(data: np.ndarray, nbytes: int, name: str) -> None:
    if data.size != nbytes:
        raise CompressionError(f"{name}: {data.size} bytes, expected {nbytes}")


def _unpack_exact(data: np.ndarray, nbits: int, name: str) -> np.ndarray:
    """The first `nbits` bits of `data`, which must be exactly that long with zero padding."""
    _require_length(data, (nbits + 7) // 8, name)
    bits = np.unpackbits(data)
    if bits[nbits:].any():
        raise CompressionError(f"{name}: nonzero padding bits")
    return bits[:nbits]
