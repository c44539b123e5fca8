"""What both wire forms share: the caps, the refusal, the decoded message and the checks.

Each check here is the one place its rule lives, so the self-describing form (codec.py) and the
compact form (compact.py) refuse the same things with the same reasons.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

from dfl_config.errors import DflMeshError
from dfl_node.wire.tags import Tag

PROTOCOL_VERSION = 2
# The wire's dtypes; a tensor's dtype travels in the compact form as its index here, so the
# order is part of the protocol version.
DTYPE_CODES = ("float32", "float64", "float16", "int8", "uint8", "int16", "int32", "int64", "bool")
DTYPES = frozenset(DTYPE_CODES)
WIRE_DTYPES = {name: np.dtype(name).newbyteorder("<") for name in DTYPE_CODES}
# A wire array's dtype -> its code: a dict lookup, where `dtype.name` costs microseconds.
DTYPE_INDEX = {WIRE_DTYPES[name]: code for code, name in enumerate(DTYPE_CODES)}
MAX_NDIM = 32
MAX_NAME_LEN = 256
MAX_PHASE_LEN = 64

Frame: TypeAlias = bytes | bytearray | memoryview


class WireError(ValueError, DflMeshError):
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
    """A decoded message; `tensors` are read-only views of the received frames.

    `tensor_frames` holds, per tensor, the frame its bytes lie in (the header frame itself for
    a compact message that carries its tensors inline), for `ReceivedTensors`.
    """

    src: int
    tag: Tag
    tensors: dict[str, np.ndarray]
    payload_bytes: int
    framing_bytes: int
    codec: str
    tensor_frames: tuple[Frame, ...]


@dataclass(frozen=True)
class TensorLayout:
    """One tensor's checked layout: it fits the caps and `nbytes` is its shape's byte count."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    nbytes: int


def is_count(value: object) -> bool:
    """A non-negative int; bools are excluded because True == 1 in Python."""
    return type(value) is int and value >= 0


def check_name(name: object) -> str:
    """A sender's tensor name, or ValueError."""
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_LEN:
        raise ValueError(f"tensor names must be non-empty str of <= {MAX_NAME_LEN}: {name!r}")
    return name


def check_phase(phase: str) -> None:
    """A sender's phase, or ValueError."""
    if len(phase) > MAX_PHASE_LEN:
        raise ValueError(f"phase longer than {MAX_PHASE_LEN} characters: {phase!r}")


def check_src(src: object) -> None:
    """A sender's id, or ValueError."""
    if type(src) is not int or src < 0:
        raise ValueError(f"src must be a non-negative int, got {src!r}")


def wire_array(name: str, value: np.ndarray) -> np.ndarray:
    """The array as the wire carries it: little-endian, C-contiguous (no copy if it is)."""
    if not isinstance(value, np.ndarray):
        raise TypeError(f"tensor {name!r} must be a numpy.ndarray, got {type(value).__name__}")
    if value.dtype in DTYPE_INDEX and value.flags.c_contiguous:
        return value  # the usual case, checked without a call into numpy's dtype machinery
    if value.dtype.name not in DTYPES:
        raise ValueError(f"tensor {name!r}: wire dtypes are {sorted(DTYPES)}, got {value.dtype}")
    # No copy when the array is already little-endian and C-contiguous (the usual case); the
    # reshape restores 0-d arrays, which ascontiguousarray turns into 1-d ones.
    return np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).reshape(value.shape)


def byte_view(frame: Any) -> memoryview:
    """A received frame as flat bytes, or WireError("bad_frame")."""
    try:
        view = memoryview(frame)
    except TypeError as err:
        raise WireError("bad_frame", type(frame).__name__) from err
    if not view.c_contiguous:
        raise WireError("bad_frame", "non-contiguous buffer")
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def check_names(names: Sequence[Any]) -> None:
    valid = all(isinstance(n, str) and 0 < len(n) <= MAX_NAME_LEN for n in names)
    if not valid or len(set(names)) != len(names):
        raise WireError("bad_name", "names must be unique non-empty strings")


def check_count(count: int, limits: WireLimits) -> None:
    if count > limits.max_tensors:
        raise WireError("too_many_tensors", f"{count} > {limits.max_tensors}")


def check_total(nbytes: int, limits: WireLimits) -> None:
    if nbytes > limits.max_message_bytes:
        raise WireError("too_large", f"{nbytes} > {limits.max_message_bytes}")


def tensor_layout(name: str, dtype: np.dtype, shape: Any, nbytes: int | None,
                  limits: WireLimits) -> TensorLayout:
    """One tensor's layout, once its shape fits the caps, numpy's index range and, where the
    message states it, its byte length (`nbytes`; None: the shape's own)."""
    if not (isinstance(shape, list | tuple) and len(shape) <= MAX_NDIM
            and all(map(is_count, shape))):
        raise WireError("bad_shape", f"{name}: {shape!r}")
    # Zero-size tensors may declare any dims; bounding the non-zero ones keeps reshape safe.
    if math.prod(max(dim, 1) for dim in shape) > limits.max_message_bytes:
        raise WireError("bad_shape", f"{name}: {shape!r} exceeds the size cap")
    size = math.prod(shape) * dtype.itemsize
    if nbytes is not None and size != nbytes:
        raise WireError("bad_shape", f"{name}: {shape!r} does not hold {nbytes} bytes")
    return TensorLayout(name, dtype, tuple(shape), size)


def array_view(item: TensorLayout, view: memoryview, offset: int = 0) -> np.ndarray:
    """A read-only array over checked bytes (`view` holds `item.nbytes` from `offset` on)."""
    array = np.ndarray(item.shape, item.dtype, view, offset)
    array.flags.writeable = False
    return array
