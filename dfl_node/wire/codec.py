"""The wire codec: a message in one of two forms, refused or accepted by one decoder.

- The self-describing form (`encode`): one msgpack header frame with every field (the
  documented HEADER_KEYS), then one raw frame per tensor. It needs no state on either side, so
  it serves whatever has no connection of its own to remember things on: the pre-phase's
  reports and answers, tools, tests. The header is plain msgpack read by a restricted decoder
  (no bin/ext types, bounded lengths, string keys only).
- The compact form (dfl_node/wire/compact.py), what `Comm` sends its neighbours: a binary
  header of a few bytes that names a layout (phase, tensor names, dtypes, shapes) the sender
  defined earlier on the same connection, with tiny tensors inside the header's own frame.
  A receiver passes the sender's `Layouts` to `decode`; the first byte tells the forms apart.

Why frames and views: tensor bytes of any size beyond a few KiB travel in frames of their own,
so neither side copies them: `encode` hands out memoryviews of the sender's C-contiguous arrays
and `decode` returns numpy views of the received frames. Bytes are little-endian on the wire.
Nothing here uses pickle: a peer can send data but never code.

`decode` checks every header field, the frame count and every frame length before it builds a
single view, so a malformed or hostile message costs one bounded parse and is refused with a
`WireError` whose `reason` is a short stable code that ledgers count (`bad_msgpack` is a header
frame of neither form that does not parse):

  header_too_large, bad_msgpack, bad_header, bad_version, bad_kind, bad_codec, too_many_tensors,
  bad_name, bad_dtype, bad_shape, too_large, frame_count, length_mismatch, bad_frame,
  unknown_layout (compact form only: a layout the sender has not defined on this connection).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgpack
import numpy as np

from dfl_node.wire.compact import Layouts, parse
from dfl_node.wire.message import (
    DTYPES,
    MAX_NAME_LEN,
    MAX_NDIM,
    MAX_PHASE_LEN,
    PROTOCOL_VERSION,
    WIRE_DTYPES,
    Frame,
    Message,
    TensorLayout,
    WireError,
    WireLimits,
    array_view,
    byte_view,
    check_count,
    check_name,
    check_names,
    check_phase,
    check_src,
    check_total,
    is_count,
    tensor_layout,
    wire_array,
)
from dfl_node.wire.tags import KINDS, Tag

__all__ = [
    "DTYPES", "HEADER_KEYS", "MAX_NAME_LEN", "MAX_NDIM", "MAX_PHASE_LEN", "PROTOCOL_VERSION",
    "Frame", "Layouts", "Message", "WireError", "WireLimits", "decode", "encode",
]  # fmt: skip

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


def encode(
    src: int, tag: Tag, tensors: Mapping[str, np.ndarray], codec: str = "raw"
) -> list[Frame]:
    """Frames for one message in the self-describing form; tensor frames alias the
    (contiguous) input arrays."""
    check_src(src)
    check_phase(tag.phase)
    arrays = {check_name(name): wire_array(name, value) for name, value in tensors.items()}
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


def decode(frames: Sequence[Frame], limits: WireLimits, layouts: Layouts | None = None) -> Message:
    """Validate a received message completely, then return views of its tensors.

    `layouts`: what the sender has defined on this connection, for the compact form (a
    definition the message carries is stored there once the message has passed); without it,
    a compact message that refers to a layout is refused as `unknown_layout`.
    """
    if not frames:
        raise WireError("frame_count", "no frames")
    views = [byte_view(frame) for frame in frames]
    first = views[0]
    if first.nbytes and first[0] < 0x80:
        return parse(views, frames, limits, layouts)
    header = _parse_header(first, limits)
    tag, src = _check_envelope(header, limits)
    specs = _check_tensors(header, limits)
    if len(views) != len(specs) + 1:
        raise WireError("frame_count", f"{len(views)} frames for {len(specs)} tensors")
    for item, view in zip(specs, views[1:], strict=True):
        if view.nbytes != item.nbytes:
            raise WireError("length_mismatch", f"{item.name}: {view.nbytes} != {item.nbytes}")
    tensors = {
        item.name: array_view(item, view) for item, view in zip(specs, views[1:], strict=True)
    }
    return Message(
        src=src,
        tag=tag,
        tensors=tensors,
        payload_bytes=sum(item.nbytes for item in specs),
        framing_bytes=first.nbytes,
        codec=header["codec"],
        tensor_frames=tuple(frames[1:]),
    )


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


def _check_envelope(header: Any, limits: WireLimits) -> tuple[Tag, int]:
    if not isinstance(header, dict) or header.keys() != HEADER_KEYS:
        raise WireError("bad_header", "header must be a map with exactly the known keys")
    if not (is_count(header["v"]) and header["v"] == PROTOCOL_VERSION):
        raise WireError("bad_version", repr(header["v"]))
    if not (isinstance(header["kind"], str) and header["kind"] in KINDS):
        raise WireError("bad_kind", repr(header["kind"]))
    if not all(is_count(header[key]) for key in ("src", "round", "step", "slot")):
        raise WireError("bad_header", "src, round, step and slot must be non-negative ints")
    phase = header["phase"]
    if not (isinstance(phase, str) and len(phase) <= MAX_PHASE_LEN):
        raise WireError("bad_header", "phase must be a short str")
    if not (isinstance(header["codec"], str) and header["codec"] in limits.codecs):
        raise WireError("bad_codec", repr(header["codec"]))
    tag = Tag(header["kind"], header["round"], phase, header["step"], header["slot"])
    return tag, header["src"]


def _check_tensors(header: dict[str, Any], limits: WireLimits) -> list[TensorLayout]:
    names, dtypes, shapes, sizes = (header[k] for k in ("names", "dtypes", "shapes", "nbytes"))
    columns = (names, dtypes, shapes, sizes)
    if not all(isinstance(column, list) for column in columns):
        raise WireError("bad_header", "names, dtypes, shapes and nbytes must be lists")
    if len({len(column) for column in columns}) != 1:
        raise WireError("bad_header", "names, dtypes, shapes and nbytes differ in length")
    check_count(len(names), limits)
    check_names(names)
    if not all(isinstance(d, str) and d in DTYPES for d in dtypes):
        raise WireError("bad_dtype", repr(dtypes))
    if not all(is_count(n) for n in sizes):
        raise WireError("bad_header", "nbytes must be non-negative ints")
    check_total(sum(sizes), limits)
    return [tensor_layout(name, WIRE_DTYPES[dtype], shape, nbytes, limits)
            for name, dtype, shape, nbytes in zip(*columns, strict=True)]
