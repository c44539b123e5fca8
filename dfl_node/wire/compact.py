"""The compact form: a binary header of a few bytes that names a layout the receiver holds.

Why: a message's names, dtypes and phase cost far more than its tag, and many messages are tiny
(a max-consensus step carries 12 bytes), so a self-describing header would outweigh them many
times over. A sender therefore describes a layout (codec, phase, and every tensor's name, dtype
and shape) once per connection and then refers to it by a one-byte id; a receiver keeps, per
sender, the layouts that sender defined (`Layouts`). Each connection delivers in order and
loses nothing (the transport contract), so a definition always arrives before its first use.

Layout of the header frame (varints are unsigned LEB128, canonical; a text is a varint byte
length and UTF-8):

    flags     1 byte: bits 0-1 the kind (its index in KINDS), bits 2-3 the layout mode,
              bit 4 a step follows, bit 5 a slot follows (else they are 0), bit 6 the tensors'
              bytes follow the header in this same frame (else one frame per tensor), bit 7 is 0
              (which no msgpack map starts with: that is how `decode` tells the forms apart)
    src, round, [step], [slot]   varints
    layout id 1 byte, < MAX_LAYOUTS
    DEFINE:   version byte, codec text, phase text, tensor count varint, then per tensor its
              name text, dtype byte (index in DTYPE_CODES), ndim byte, dims varints; the
              receiver stores this layout under the id (replacing what the id held)
    SAME:     nothing: the stored layout, shapes included
    SHAPES:   the dims varints of every tensor (ndims from the stored layout), which replace
              the stored shapes

A max-consensus step is then 4-5 header bytes and its 12 payload bytes, in one frame.

Tensor byte counts are not sent: each is its shape's, and every frame length is checked against
it. Every check of the self-describing form holds here with the same reason, the stored layout
was checked when it was defined, and a layout is stored only once the whole message has passed,
so a refused message changes nothing. One reason is the compact form's own: `unknown_layout`,
a reference to an id the sender has not defined on this connection.

The sender side (`Encoder`) keeps one id per layout it uses (the least recently used id is
reused beyond MAX_LAYOUTS) and, per destination, which layout and shapes that destination holds
under each id, so each message goes out in the smallest form its destination can read. Which
form that is depends only on the messages sent before on that connection, so the byte counts
are identical under every transport; `restart` makes every destination start afresh.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from dfl_node.wire.message import (
    DTYPE_CODES,
    DTYPE_INDEX,
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
    check_count,
    check_name,
    check_names,
    check_phase,
    check_src,
    check_total,
    tensor_layout,
    wire_array,
)
from dfl_node.wire.tags import KINDS, Tag

DEFINE, SAME, SHAPES = 0, 1, 2
MAX_LAYOUTS = 16  # ids per sender: bounds what a receiver stores for each neighbour
INLINE_MAX = 4096  # tensors of at most this many bytes in all travel in the header's frame
_STEP, _SLOT, _INLINE = 0x10, 0x20, 0x40
_KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}
_MAX_VARINT_BYTES = 10  # 64 bits

Shapes = tuple[tuple[int, ...], ...]
# codec, phase, then (name, dtype code, ndim) per tensor: what an id stands for, shapes apart
LayoutKey = tuple[str, str, tuple[tuple[str, int, int], ...]]


@dataclass(frozen=True)
class Layout:
    """A checked layout as a receiver stores it."""

    codec: str
    phase: str
    specs: tuple[TensorLayout, ...]
    nbytes: int


class Layouts:
    """The layouts one sender has defined on one connection, by id (at most MAX_LAYOUTS)."""

    def __init__(self) -> None:
        self._by_id: dict[int, Layout] = {}

    def get(self, layout_id: int) -> Layout | None:
        return self._by_id.get(layout_id)

    def store(self, layout_id: int, layout: Layout) -> None:
        self._by_id[layout_id] = layout

    def __len__(self) -> int:
        return len(self._by_id)

    def copy(self) -> Layouts:
        """An independent copy (to try a message without changing what is held)."""
        twin = Layouts()
        twin._by_id = dict(self._by_id)
        return twin


def parse(views: Sequence[memoryview], frames: Sequence[Frame], limits: WireLimits,
          layouts: Layouts | None) -> Message:
    """Check a compact message completely, then return views of its tensors; a definition it
    carries is stored in `layouts` only then (with None, a reference is `unknown_layout`)."""
    first = views[0]
    if first.nbytes > limits.max_header_bytes + INLINE_MAX:
        raise WireError("header_too_large", f"{first.nbytes} bytes")
    data = bytes(first)
    try:
        return _parse(data, views, frames, limits, layouts)
    except IndexError:
        raise WireError("bad_header", "truncated") from None


def _parse(data: bytes, views: Sequence[memoryview], frames: Sequence[Frame],
           limits: WireLimits, layouts: Layouts | None) -> Message:
    flags = data[0]
    if flags & 3 >= len(KINDS):
        raise WireError("bad_kind", str(flags & 3))
    mode = (flags >> 2) & 3
    src, pos = _varint(data, 1)
    round_, pos = _varint(data, pos)
    step, pos = _varint(data, pos) if flags & _STEP else (0, pos)
    slot, pos = _varint(data, pos) if flags & _SLOT else (0, pos)
    layout_id = data[pos]
    pos += 1
    if layout_id >= MAX_LAYOUTS:
        raise WireError("bad_header", f"layout id {layout_id}")
    if mode == DEFINE:
        layout, pos = _definition(data, pos, limits)
    elif mode in (SAME, SHAPES):
        stored = layouts.get(layout_id) if layouts is not None else None
        if stored is None:
            raise WireError("unknown_layout", str(layout_id))
        layout = stored
        if mode == SHAPES:
            layout, pos = _reshaped(stored, data, pos, limits)
    else:
        raise WireError("bad_header", f"layout mode {mode}")
    if pos > limits.max_header_bytes:
        raise WireError("header_too_large", f"{pos} > {limits.max_header_bytes}")
    specs = layout.specs
    if flags & _INLINE:
        if len(views) != 1:
            raise WireError("frame_count", f"{len(views)} frames for an inline message")
        if len(data) - pos != layout.nbytes:
            raise WireError("length_mismatch", f"{len(data) - pos} != {layout.nbytes}")
        tensors = {}
        for item in specs:  # views of the header's bytes, read-only as bytes are
            tensors[item.name] = np.ndarray(item.shape, item.dtype, data, pos)
            pos += item.nbytes
        tensor_frames = (frames[0],) * len(specs)
    else:
        if pos != len(data):
            raise WireError("bad_header", f"{len(data) - pos} bytes after the header")
        if len(views) != len(specs) + 1:
            raise WireError("frame_count", f"{len(views)} frames for {len(specs)} tensors")
        for item, view in zip(specs, views[1:], strict=True):
            if view.nbytes != item.nbytes:
                raise WireError("length_mismatch", f"{item.name}: {view.nbytes} != {item.nbytes}")
        tensors = {item.name: array_view(item, view)
                   for item, view in zip(specs, views[1:], strict=True)}
        tensor_frames = tuple(frames[1:])
    if layouts is not None and mode != SAME:
        layouts.store(layout_id, layout)
    return Message(src=src, tag=Tag(KINDS[flags & 3], round_, layout.phase, step, slot),
                   tensors=tensors, payload_bytes=layout.nbytes,
                   framing_bytes=len(data) - layout.nbytes if flags & _INLINE else len(data),
                   codec=layout.codec, tensor_frames=tensor_frames)


def _definition(data: bytes, pos: int, limits: WireLimits) -> tuple[Layout, int]:
    version = data[pos]
    if version != PROTOCOL_VERSION:
        raise WireError("bad_version", str(version))
    codec, pos = _text(data, pos + 1, MAX_NAME_LEN, "bad_codec")
    if codec not in limits.codecs:
        raise WireError("bad_codec", repr(codec))
    phase, pos = _text(data, pos, MAX_PHASE_LEN, "bad_header")
    count, pos = _varint(data, pos)
    check_count(count, limits)
    columns = []
    for _ in range(count):
        name, pos = _text(data, pos, MAX_NAME_LEN, "bad_name")
        code, ndim = data[pos], data[pos + 1]
        pos += 2
        if code >= len(DTYPE_CODES):
            raise WireError("bad_dtype", str(code))
        if ndim > MAX_NDIM:
            raise WireError("bad_shape", f"{name}: {ndim} dims")
        dims = []
        for _ in range(ndim):
            dim, pos = _varint(data, pos)
            dims.append(dim)
        columns.append((name, WIRE_DTYPES[DTYPE_CODES[code]], dims))
    check_names([name for name, _, _ in columns])
    specs = tuple(tensor_layout(name, dtype, dims, None, limits) for name, dtype, dims in columns)
    return _layout(codec, phase, specs, limits), pos


def _reshaped(stored: Layout, data: bytes, pos: int, limits: WireLimits) -> tuple[Layout, int]:
    specs = []
    for item in stored.specs:
        dims = []
        for _ in item.shape:
            dim, pos = _varint(data, pos)
            dims.append(dim)
        specs.append(tensor_layout(item.name, item.dtype, dims, None, limits))
    return _layout(stored.codec, stored.phase, tuple(specs), limits), pos


def _layout(codec: str, phase: str, specs: tuple[TensorLayout, ...], limits: WireLimits) -> Layout:
    nbytes = sum(item.nbytes for item in specs)
    check_total(nbytes, limits)
    return Layout(codec, phase, specs, nbytes)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    value, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if byte == 0:
                raise WireError("bad_header", "non-canonical varint")
            return value, pos + 1
        shift += 7
        if shift >= 7 * _MAX_VARINT_BYTES:
            raise WireError("bad_header", "varint too long")


def _text(data: bytes, pos: int, max_chars: int, reason: str) -> tuple[str, int]:
    size, pos = _varint(data, pos)
    raw = data[pos:pos + size]
    if len(raw) != size:
        raise WireError("bad_header", "truncated")
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise WireError(reason, "not UTF-8") from None
    if len(text) > max_chars or (reason == "bad_name" and not text):
        raise WireError(reason, f"{text[:max_chars]!r}...")
    return text, pos + size


# ----------------------------------------------------------------------------- the sender


def _put(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def _put_text(out: bytearray, text: str) -> None:
    raw = text.encode()
    _put(out, len(raw))
    out += raw


@dataclass
class Outgoing:
    """One message prepared for any number of destinations: the tensors are read once, each
    header form is built once, on first use."""

    src: int
    tag: Tag
    codec: str
    key: LayoutKey
    layout_id: int
    arrays: dict[str, np.ndarray]
    shapes: Shapes
    payload_bytes: int
    _built: dict[int, tuple[list[Frame], int]] = field(default_factory=dict)

    def frames(self, mode: int) -> tuple[list[Frame], int]:
        """The frames of the message in `mode`, and its header bytes."""
        built = self._built.get(mode)
        if built is None:
            built = self._built[mode] = self._build(mode)
        return built

    def _build(self, mode: int) -> tuple[list[Frame], int]:
        tag, inline = self.tag, self.payload_bytes <= INLINE_MAX
        head = bytearray((_KIND_CODE[tag.kind] | mode << 2 | (_STEP if tag.step else 0)
                          | (_SLOT if tag.slot else 0) | (_INLINE if inline else 0),))
        _put(head, self.src)
        _put(head, tag.round)
        if tag.step:
            _put(head, tag.step)
        if tag.slot:
            _put(head, tag.slot)
        head.append(self.layout_id)
        if mode == DEFINE:
            head.append(PROTOCOL_VERSION)
            _put_text(head, self.codec)
            _put_text(head, tag.phase)
            _put(head, len(self.arrays))
            for name, array in self.arrays.items():
                _put_text(head, name)
                head.append(DTYPE_INDEX[array.dtype])
                head.append(array.ndim)
                for dim in array.shape:
                    _put(head, dim)
        elif mode == SHAPES:
            for shape in self.shapes:
                for dim in shape:
                    _put(head, dim)
        header_bytes = len(head)
        if inline:
            for array in self.arrays.values():
                head += array.data
            return [bytes(head)], header_bytes
        data = [array.reshape(-1).view(np.uint8).data for array in self.arrays.values()]
        return [bytes(head), *data], header_bytes


class Encoder:
    """One node's sender side: an id per layout, and what each destination holds."""

    def __init__(self) -> None:
        self._ids: dict[LayoutKey, int] = {}  # least recently used first
        self._told: dict[int, dict[int, tuple[LayoutKey, Shapes]]] = {}

    def prepare(self, src: int, tag: Tag, tensors: Mapping[str, np.ndarray],
                codec: str = "raw") -> Outgoing:
        """The message's tensors as the wire carries them, under its layout's id."""
        check_src(src)
        check_phase(tag.phase)
        arrays = {check_name(name): wire_array(name, value) for name, value in tensors.items()}
        key = (codec, tag.phase, tuple((name, DTYPE_INDEX[array.dtype], array.ndim)
                                       for name, array in arrays.items()))
        return Outgoing(src, tag, codec, key, self._id(key), arrays,
                        tuple(array.shape for array in arrays.values()),
                        sum(array.nbytes for array in arrays.values()))

    def mode(self, dst: int, out: Outgoing) -> int:
        """The form `dst` can read `out` in, given what it was sent before; from now on `dst`
        holds `out`'s layout and shapes under its id."""
        told = self._told.setdefault(dst, {})
        held = told.get(out.layout_id)
        told[out.layout_id] = (out.key, out.shapes)
        if held is None or held[0] != out.key:
            return DEFINE
        return SAME if held[1] == out.shapes else SHAPES

    def restart(self) -> None:
        """Every destination starts afresh: ids from 0, each layout defined again."""
        self._ids.clear()
        self._told.clear()

    def forget(self, dst: int) -> None:
        """`dst` holds nothing of ours any more (what was queued for it was dropped)."""
        self._told.pop(dst, None)

    def _id(self, key: LayoutKey) -> int:
        layout_id = self._ids.pop(key, None)
        if layout_id is None:
            if len(self._ids) < MAX_LAYOUTS:
                layout_id = len(self._ids)
            else:
                layout_id = self._ids.pop(next(iter(self._ids)))
        self._ids[key] = layout_id
        return layout_id
