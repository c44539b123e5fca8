"""The wire codec: one msgpack header frame, then one raw frame per tensor.

Why this format:
- The header is plain msgpack read by a restricted decoder (no bin/ext types, bounded lengths,
  string keys only), so a peer can send data but never code; nothing here uses pickle.
- Tensor bytes travel in frames of their own, so neither side copies them: `encode` hands out
  memoryviews of the sender's C-contiguous arrays and `decode` returns numpy views of the
  received frames. Bytes are little-endian on the wire.
- `decode` checks every header field, the frame count and every frame length before it builds a
  single view, so a malformed or hostile message costs one bounded msgpack parse and is refused
  with a `WireError` whose `reason` is a short stable code that ledgers count:

  header_too_large, bad_msgpack, bad_header, bad_version, bad_kind, bad_codec, too_many_tensors,
  bad_name, bad_dtype, bad_shape, too_large, frame_count, length_mismatch, bad_frame.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import msgpack
import numpy as np

from dfl_node.wire.tags import KINDS, Tag

PROTOCOL_VERSION = 1
DTYPES = frozenset(
    {"float32", "float64", "float16", "int8", "uint8", "int16", "int32", "int64", "bool"}
)
MAX_NDIM = 32
MAX_NAME_LEN = 256
MAX_PHASE_LEN = 64
HEADER_KEYS = frozenset(
    {
        "v",
        "kind",
        "src",
        "round",
        "phase",
        "step",
        "slot",
        "names",
        "dtypes",
        "shapes",
        "nbytes",
        "codec",
    }
)

Frame: TypeAlias = bytes | bytearray | memoryview


class WireError(ValueError):
    """A received message was refused; `reason` is the stable code a ledger counts."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class WireLimits:
    """Caps taken from the run plan; anything beyond them is refused before it is read."""

    max_tensors: int
    max_message_bytes: int
    max_header_bytes: int = 65536
    codecs: frozenset[str] = frozenset({"raw"})

    @property
    def max_frame_bytes(self) -> int:
        """The largest single frame a valid message can hold (for the socket's MAXMSGSIZE)."""
        return max(self.max_message_bytes, self.max_header_bytes)


@dataclass(frozen=True)
class Message:
    """A decoded message; `tensors` are read-only views of the received frames."""

    src: int
    tag: Tag
    tensors: dict[str, np.ndarray]
    payload_bytes: int
    framing_bytes: int
    codec: str


@dataclass(frozen=True)
class _Spec:
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    nbytes: int


def encode(
    src: int, tag: Tag, tensors: Mapping[str, np.ndarray], codec: str = "raw"
) -> list[Frame]:
    """Frames for one message; tensor frames alias the (contiguous) input arrays."""
    if type(src) is not int or src < 0:
        raise ValueError(f"src must be a non-negative int, got {src!r}")
    if len(tag.phase) > MAX_PHASE_LEN:
        raise ValueError(f"phase longer than {MAX_PHASE_LEN} characters: {tag.phase!r}")
    arrays = {_check_name(name): _wire_array(name, value) for name, value in tensors.items()}
    header = {
        "v": PROTOCOL_VERSION,
        "kind": tag.kind,
        "src": src,
        "round": tag.round,
        "phase": tag.phase,
        "step": tag.step,
        "slot": tag.slot,
        "names": list(arrays),
        "dtypes": [a.dtype.name for a in arrays.values()],
        "shapes": [list(a.shape) for a in arrays.values()],
        "nbytes": [a.nbytes for a in arrays.values()],
        "codec": codec,
    }
    return [msgpack.packb(header), *(a.reshape(-1).view(np.uint8).data for a in arrays.values())]


def decode(frames: Sequence[Frame], limits: WireLimits) -> Message:
    """Validate a received message completely, then return views of its tensor frames."""
    if not frames:
        raise WireError("frame_count", "no frames")
    views = [_byte_view(frame) for frame in frames]
    header = _parse_header(views[0], limits)
    tag, src = _check_envelope(header, limits)
    specs = _check_tensors(header, limits)
    if len(views) != len(specs) + 1:
        raise WireError("frame_count", f"{len(views)} frames for {len(specs)} tensors")
    for spec, view in zip(specs, views[1:], strict=True):
        if view.nbytes != spec.nbytes:
            raise WireError("length_mismatch", f"{spec.name}: {view.nbytes} != {spec.nbytes}")
    tensors = {
        spec.name: _array_view(spec, view) for spec, view in zip(specs, views[1:], strict=True)
    }
    return Message(
        src=src,
        tag=tag,
        tensors=tensors,
        payload_bytes=sum(spec.nbytes for spec in specs),
        framing_bytes=views[0].nbytes,
        codec=header["codec"],
    )


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_LEN:
        raise ValueError(f"tensor names must be non-empty str of <= {MAX_NAME_LEN}: {name!r}")
    return name


def _wire_array(name: str, value: np.ndarray) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise TypeError(f"tensor {name!r} must be a numpy.ndarray, got {type(value).__name__}")
    if value.dtype.name not in DTYPES:
        raise ValueError(f"tensor {name!r}: wire dtypes are {sorted(DTYPES)}, got {value.dtype}")
    # No copy when the array is already little-endian and C-contiguous (the usual case); the
    # reshape restores 0-d arrays, which ascontiguousarray turns into 1-d ones.
    return np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).reshape(value.shape)


def _byte_view(frame: Any) -> memoryview:
    try:
        view = memoryview(frame)
    except TypeError as err:
        raise WireError("bad_frame", type(frame).__name__) from err
    if not view.c_contiguous:
        raise WireError("bad_frame", "non-contiguous buffer")
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _parse_header(view: memoryview, limits: WireLimits) -> Any:
    if view.nbytes > limits.max_header_bytes:
        raise WireError("header_too_large", f"{view.nbytes} > {limits.max_header_bytes}")
    try:
        return msgpack.unpackb(
            view,
            raw=False,
            strict_map_key=True,
            max_str_len=MAX_NAME_LEN,
            max_bin_len=0,
            max_ext_len=0,
            max_array_len=max(limits.max_tensors, MAX_NDIM),
            max_map_len=len(HEADER_KEYS),
        )
    except (msgpack.UnpackException, ValueError, TypeError) as err:
        raise WireError("bad_msgpack", str(err)) from err


def _is_count(value: object) -> bool:
    """A non-negative int; bools are excluded because True == 1 in Python."""
    return type(value) is int and value >= 0


def _check_envelope(header: Any, limits: WireLimits) -> tuple[Tag, int]:
    if not isinstance(header, dict) or header.keys() != HEADER_KEYS:
        raise WireError("bad_header", "header must be a map with exactly the known keys")
    if not (_is_count(header["v"]) and header["v"] == PROTOCOL_VERSION):
        raise WireError("bad_version", repr(header["v"]))
    if not (isinstance(header["kind"], str) and header["kind"] in KINDS):
        raise WireError("bad_kind", repr(header["kind"]))
    if not all(_is_count(header[key]) for key in ("src", "round", "step", "slot")):
        raise WireError("bad_header", "src, round, step and slot must be non-negative ints")
    phase = header["phase"]
    if not (isinstance(phase, str) and len(phase) <= MAX_PHASE_LEN):
        raise WireError("bad_header", "phase must be a short str")
    if not (isinstance(header["codec"], str) and header["codec"] in limits.codecs):
        raise WireError("bad_codec", repr(header["codec"]))
    tag = Tag(header["kind"], header["round"], phase, header["step"], header["slot"])
    return tag, header["src"]


def _check_tensors(header: dict[str, Any], limits: WireLimits) -> list[_Spec]:
    names, dtypes, shapes, sizes = (header[k] for k in ("names", "dtypes", "shapes", "nbytes"))
    columns = (names, dtypes, shapes, sizes)
    if not all(isinstance(column, list) for column in columns):
        raise WireError("bad_header", "names, dtypes, shapes and nbytes must be lists")
    if len({len(column) for column in columns}) != 1:
        raise WireError("bad_header", "names, dtypes, shapes and nbytes differ in length")
    if len(names) > limits.max_tensors:
        raise WireError("too_many_tensors", f"{len(names)} > {limits.max_tensors}")
    _check_names(names)
    if not all(isinstance(d, str) and d in DTYPES for d in dtypes):
        raise WireError("bad_dtype", repr(dtypes))
    if not all(_is_count(n) for n in sizes):
        raise WireError("bad_header", "nbytes must be non-negative ints")
    if sum(sizes) > limits.max_message_bytes:
        raise WireError("too_large", f"{sum(sizes)} > {limits.max_message_bytes}")
    return [_spec(*column, limits) for column in zip(*columns, strict=True)]


def _check_names(names: list[Any]) -> None:
    valid = all(isinstance(n, str) and 0 < len(n) <= MAX_NAME_LEN for n in names)
    if not valid or len(set(names)) != len(names):
        raise WireError("bad_name", "names must be unique non-empty strings")


def _spec(name: str, dtype: str, shape: Any, nbytes: int, limits: WireLimits) -> _Spec:
    """One tensor's layout, once its shape fits its byte length and numpy's index range."""
    if not (isinstance(shape, list) and len(shape) <= MAX_NDIM and all(map(_is_count, shape))):
        raise WireError("bad_shape", f"{name}: {shape!r}")
    # Zero-size tensors may declare any dims; bounding the non-zero ones keeps reshape safe.
    if math.prod(max(dim, 1) for dim in shape) > limits.max_message_bytes:
        raise WireError("bad_shape", f"{name}: {shape!r} exceeds the size cap")
    wire_dtype = np.dtype(dtype).newbyteorder("<")
    if math.prod(shape) * wire_dtype.itemsize != nbytes:
        raise WireError("bad_shape", f"{name}: {shape!r} does not hold {nbytes} bytes")
    return _Spec(name, wire_dtype, tuple(shape), nbytes)


def _array_view(spec: _Spec, view: memoryview) -> np.ndarray:
    array = np.frombuffer(view, dtype=spec.dtype).reshape(spec.shape)
    array.flags.writeable = False
    return array
