"""Property-based fuzzing of the wire decoder (hypothesis), bounded so CI runs it in seconds.

What must hold for every input a peer can produce:
- `decode` either returns a Message or raises WireError with one of the documented reasons:
  no other exception, whatever the frames or the header say;
- a valid encoding round-trips exactly (source, tag, codec, names, dtypes, shapes, bytes);
- a mutated valid message is refused, or it decodes to exactly what the mutated bytes say: the
  header fields of the mutated header frame and the bytes of the mutated tensor frames;
- in the compact form, every form of a message decodes to what the self-describing form says,
  and a mutated compact message is refused without changing the layouts its receiver holds.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgpack
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dfl_node.wire.codec import (
    DTYPES,
    HEADER_KEYS,
    MAX_PHASE_LEN,
    PROTOCOL_VERSION,
    Layouts,
    Message,
    WireError,
    WireLimits,
    decode,
    encode,
)
from dfl_node.wire.compact import MAX_LAYOUTS
from dfl_node.wire.session import Session
from dfl_node.wire.tags import KINDS, Tag
from tests.test_wire import REASONS

LIMITS = WireLimits(max_tensors=8, max_message_bytes=1 << 16, max_header_bytes=4096)
# An example takes milliseconds; the deadline only catches a decoder that stalls, loosely enough
# for a loaded CI machine.
FUZZ = settings(max_examples=400, deadline=timedelta(seconds=5), database=None,
                suppress_health_check=[HealthCheck.too_slow])

frames_st = st.lists(st.binary(max_size=96), max_size=5)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1),
                    st.floats(allow_nan=True), st.text(max_size=12), st.binary(max_size=8))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12)
tags = st.builds(Tag, kind=st.sampled_from(KINDS), round=st.integers(0, 2**40),
                 phase=st.text(max_size=MAX_PHASE_LEN), step=st.integers(0, 2**20),
                 slot=st.integers(0, 255))


@st.composite
def arrays(draw: st.DrawFn) -> np.ndarray:
    dtype = np.dtype(draw(st.sampled_from(sorted(DTYPES))))
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    data = draw(st.binary(min_size=dtype.itemsize * int(np.prod(shape)),
                          max_size=dtype.itemsize * int(np.prod(shape))))
    array = np.frombuffer(data, dtype=np.uint8).view(dtype).reshape(shape)
    return array if dtype != np.bool_ else array.astype(np.uint8).astype(bool)


tensor_maps = st.dictionaries(st.text(min_size=1, max_size=8), arrays(), max_size=4)


def outcome(frames: list[Any]) -> Message | None:
    """The decoded message, or None when it was refused with a documented reason; any other
    exception propagates and fails the property."""
    try:
        return decode(frames, LIMITS)
    except WireError as err:
        assert err.reason in REASONS, err.reason
        return None


@FUZZ
@given(frames_st)
def test_arbitrary_frames_raise_only_wire_error(frames: list[bytes]) -> None:
    assert outcome(frames) is None


@settings(FUZZ, max_examples=200)
@given(st.dictionaries(st.sampled_from(sorted(HEADER_KEYS)), values, min_size=len(HEADER_KEYS)),
       st.dictionaries(st.text(max_size=6), values, max_size=2), frames_st)
def test_arbitrary_headers_raise_only_wire_error(
    known: dict[str, Any], extra: dict[str, Any], tensor_frames: list[bytes]
) -> None:
    header = msgpack.packb({**known, **extra}, use_bin_type=True)
    message = outcome([header, *tensor_frames])
    if message is not None:  # only a header with exactly the known keys and valid values
        assert set(known) == HEADER_KEYS and not set(extra) - HEADER_KEYS
        assert message.src == known["src"] and known["v"] == PROTOCOL_VERSION


@FUZZ
@given(st.integers(0, 2**31), tags, tensor_maps)
def test_valid_messages_round_trip(src: int, tag: Tag, tensors: dict[str, np.ndarray]) -> None:
    frames = [bytes(frame) for frame in encode(src, tag, tensors)]
    message = outcome(frames)
    assert message is not None
    assert (message.src, message.tag, message.codec) == (src, tag, "raw")
    assert list(message.tensors) == list(tensors)
    for name, sent in tensors.items():
        got = message.tensors[name]
        assert (got.dtype, got.shape, got.tobytes()) == (sent.dtype, sent.shape, sent.tobytes())
    assert message.payload_bytes == sum(a.nbytes for a in tensors.values())
    assert message.framing_bytes == len(frames[0])


@st.composite
def mutations(draw: st.DrawFn, frames: list[bytes]) -> list[bytes]:
    """1-4 edits: overwrite, insert or delete bytes in a frame, drop or add a frame."""
    out = [bytearray(frame) for frame in frames]
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(("set", "insert", "truncate", "drop", "add")))
        if op == "add" or not out:
            out.insert(draw(st.integers(0, len(out))), bytearray(draw(st.binary(max_size=16))))
            continue
        index = draw(st.integers(0, len(out) - 1))
        target = out[index]
        at = draw(st.integers(0, len(target)))
        if op == "drop":
            del out[index]
        elif op == "insert":
            target[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif op == "truncate":
            del target[at:]
        elif target:
            target[min(at, len(target) - 1)] = draw(st.integers(0, 255))
    return [bytes(frame) for frame in out]


@FUZZ
@given(st.integers(0, 2**31), tags, tensor_maps, st.data())
def test_mutated_messages_are_refused_or_decode_to_the_mutation(
    src: int, tag: Tag, tensors: dict[str, np.ndarray], data: st.DataObject
) -> None:
    mutated = data.draw(mutations([bytes(f) for f in encode(src, tag, tensors)]))
    message = outcome(mutated)
    if message is None:
        return
    header = msgpack.unpackb(mutated[0], raw=False)
    assert message.src == header["src"]
    assert message.tag == Tag(header["kind"], header["round"], header["phase"],
                              header["step"], header["slot"])
    assert list(message.tensors) == header["names"]
    for got, frame, dtype, shape in zip(message.tensors.values(), mutated[1:],
                                        header["dtypes"], header["shapes"], strict=True):
        assert (got.dtype.name, list(got.shape), got.tobytes()) == (dtype, shape, frame)


def same_content(got: Message, want: Message) -> bool:
    return ((got.src, got.tag, got.codec, list(got.tensors)) == (want.src, want.tag, want.codec,
                                                                  list(want.tensors))
            and all((a.dtype, a.shape, a.tobytes()) == (b.dtype, b.shape, b.tobytes())
                    for a, b in zip(got.tensors.values(), want.tensors.values(), strict=True)))


@FUZZ
@given(st.integers(0, 2**31), tags, st.lists(tensor_maps, min_size=1, max_size=4))
def test_compact_forms_round_trip(src: int, tag: Tag, messages: list[dict[str, np.ndarray]]
                                  ) -> None:
    wire, held = Session(LIMITS), Layouts()
    for tensors in [*messages, *messages]:  # definitions, then references
        out, own = wire.encode(src, tag, tensors)
        frames, framing = wire.frames(1, out)
        message = outcome_with([bytes(frame) for frame in frames], held)
        reference = decode([bytes(frame) for frame in encode(src, tag, tensors)], LIMITS)
        assert message is not None and same_content(message, reference)
        assert same_content(own, reference) and message.framing_bytes == framing


def outcome_with(frames: list[bytes], held: Layouts) -> Message | None:
    try:
        return decode(frames, LIMITS, held)
    except WireError as err:
        assert err.reason in REASONS, err.reason
        return None


@FUZZ
@given(st.integers(0, 2**31), tags, tensor_maps, st.data())
def test_mutated_compact_messages_change_nothing_held_unless_accepted(
    src: int, tag: Tag, tensors: dict[str, np.ndarray], data: st.DataObject
) -> None:
    wire, held = Session(LIMITS), Layouts()
    for _ in range(2):  # a definition, then a reference
        frames = [bytes(f) for f in wire.frames(1, wire.encode(src, tag, tensors)[0])[0]]
        before = [held.get(i) for i in range(MAX_LAYOUTS)]
        trial = held.copy()
        if outcome_with(data.draw(mutations(frames)), trial) is None:
            assert [trial.get(i) for i in range(MAX_LAYOUTS)] == before
        decode(frames, LIMITS, held)
