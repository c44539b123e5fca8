"""The wire codec's self-describing form: exact round trips, zero-copy views, and refusal of every
malformed message (the compact form: tests/test_wire_compact.py)."""

from __future__ import annotations

import random

import msgpack
import numpy as np
import pytest

from dfl_node.wire.codec import (
    DTYPES,
    MAX_NDIM,
    PROTOCOL_VERSION,
    Message,
    WireError,
    WireLimits,
    decode,
    encode,
)
from dfl_node.wire.tags import Tag

REASONS = {
    "header_too_large", "bad_msgpack", "bad_header", "bad_version", "bad_kind", "bad_codec",
    "too_many_tensors", "bad_name", "bad_dtype", "bad_shape", "too_large", "frame_count",
    "length_mismatch", "bad_frame", "unknown_layout",
}  # fmt: skip
LIMITS = WireLimits(max_tensors=8, max_message_bytes=1 << 20)
TAG = Tag("data", 3, "gossip", step=2, slot=1)


def sample_tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "w": rng.standard_normal((3, 4)).astype(np.float32),
        "bias": rng.standard_normal(5),
        "half": rng.standard_normal((2, 2)).astype(np.float16),
        "scalar": np.array(7, dtype=np.int64),
        "empty": np.zeros((0, 3), dtype=np.int16),
        "mask": np.array([True, False, True]),
        "idx": np.arange(-3, 3, dtype=np.int8),
        "bytes": np.arange(4, dtype=np.uint8),
    }


def valid_frames() -> list:
    return encode(5, TAG, sample_tensors())


def header_of(frames: list) -> dict:
    return msgpack.unpackb(frames[0])


def with_header(frames: list, **changes) -> list:
    """The same frames under a header with some fields changed."""
    header = header_of(frames) | changes
    return [msgpack.packb(header), *frames[1:]]


def reason_of(frames: list, limits: WireLimits = LIMITS) -> str:
    with pytest.raises(WireError) as info:
        decode(frames, limits)
    return info.value.reason


def test_round_trip_preserves_every_dtype_shape_and_value() -> None:
    tensors = sample_tensors()
    frames = encode(5, TAG, tensors)
    message = decode([bytes(frame) for frame in frames], LIMITS)
    assert (message.src, message.tag, message.codec) == (5, TAG, "raw")
    assert list(message.tensors) == list(tensors)
    for name, original in tensors.items():
        got = message.tensors[name]
        assert got.dtype == original.dtype and got.shape == original.shape
        assert np.array_equal(got, original)
    assert (
        message.payload_bytes
        == sum(a.nbytes for a in tensors.values())
        == 48 + 40 + 8 + 8 + 0 + 3 + 6 + 4
    )
    assert message.framing_bytes == len(frames[0])
    assert {a.dtype.name for a in tensors.values()} <= DTYPES


def test_header_fields_are_the_documented_ones() -> None:
    header = header_of(encode(9, TAG, {"x": np.ones((2, 3), np.float32)}))
    assert header == {
        "v": PROTOCOL_VERSION, "kind": "data", "src": 9, "round": 3, "phase": "gossip",
        "step": 2, "slot": 1, "names": ["x"], "dtypes": ["float32"], "shapes": [[2, 3]],
        "nbytes": [24], "codec": "raw",
    }  # fmt: skip


def test_control_message_without_tensors() -> None:
    tag = Tag("ctrl", 0, "hello")
    frames = encode(1, tag, {})
    assert len(frames) == 1
    message = decode(frames, LIMITS)
    assert (message.tag, message.tensors, message.payload_bytes) == (tag, {}, 0)
    assert tag.is_control and not TAG.is_control


def test_non_native_and_non_contiguous_inputs_arrive_as_values() -> None:
    big_endian = np.arange(6, dtype=">i4")
    transposed = np.arange(12.0).reshape(3, 4).T
    message = decode(encode(0, TAG, {"be": big_endian, "t": transposed}), LIMITS)
    assert np.array_equal(message.tensors["be"], big_endian)
    assert np.array_equal(message.tensors["t"], transposed)
    assert message.tensors["t"].shape == (4, 3)


def test_encode_aliases_the_sender_arrays() -> None:
    w = np.arange(10, dtype=np.float32)
    frame = encode(0, TAG, {"w": w})[1]
    assert isinstance(frame, memoryview)
    assert np.shares_memory(np.frombuffer(frame, dtype=np.uint8), w)


def test_decode_returns_read_only_views_of_the_frames() -> None:
    frames = [bytearray(frame) for frame in encode(0, TAG, {"w": np.arange(6.0).reshape(2, 3)})]
    got = decode(frames, LIMITS).tensors["w"]
    assert np.shares_memory(got, np.frombuffer(frames[1], dtype=np.uint8))
    assert not got.flags.writeable
    frames[1][:8] = np.float64(42.0).tobytes()  # the view follows its buffer: no copy was made
    assert got[0, 0] == 42.0


def test_encode_refuses_what_the_wire_cannot_carry() -> None:
    with pytest.raises(ValueError, match="wire dtypes"):
        encode(0, TAG, {"c": np.zeros(2, np.complex64)})
    with pytest.raises(TypeError, match=r"numpy\.ndarray"):
        encode(0, TAG, {"x": [1.0, 2.0]})
    with pytest.raises(ValueError, match="names"):
        encode(0, TAG, {"": np.zeros(1)})
    with pytest.raises(ValueError, match="phase"):
        encode(0, Tag("data", 0, "p" * 65), {})
    with pytest.raises(ValueError, match="src"):
        encode(-1, TAG, {})


@pytest.mark.parametrize(
    ("reason", "changes"),
    [
        ("bad_header", {"src": -1}),
        ("bad_header", {"src": True}),
        ("bad_header", {"round": 1.5}),
        ("bad_header", {"step": "2"}),
        ("bad_header", {"phase": 7}),
        ("bad_header", {"phase": "p" * 65}),
        ("bad_header", {"names": "w"}),
        ("bad_header", {"nbytes": [1, 2]}),
        ("bad_version", {"v": PROTOCOL_VERSION + 1}),
        ("bad_version", {"v": True}),
        ("bad_kind", {"kind": "evil"}),
        ("bad_kind", {"kind": 0}),
        ("bad_codec", {"codec": "zstd"}),
        ("bad_codec", {"codec": None}),
    ],
)
def test_envelope_violations(reason: str, changes: dict) -> None:
    frames = encode(5, TAG, {"w": np.zeros(2, np.float32)})
    assert reason_of(with_header(frames, **changes)) == reason


@pytest.mark.parametrize(
    ("reason", "changes"),
    [
        ("bad_name", {"names": ["w", "w"]}),
        ("bad_name", {"names": ["w", ""]}),
        ("bad_name", {"names": ["w", 3]}),
        ("bad_dtype", {"dtypes": ["float32", "object"]}),
        ("bad_dtype", {"dtypes": ["float32", "complex64"]}),
        ("bad_dtype", {"dtypes": ["float32", 4]}),
        ("bad_shape", {"shapes": [[2], [-3]]}),
        ("bad_shape", {"shapes": [[2], [True, 3]]}),
        ("bad_shape", {"shapes": [[2], "3"]}),
        ("bad_shape", {"shapes": [[2], [4]]}),
        ("bad_shape", {"shapes": [[2], [0, 10**12]]}),
        ("bad_header", {"nbytes": [8, -12]}),
        ("too_large", {"nbytes": [8, 2 << 20]}),
        ("length_mismatch", {"shapes": [[2], [2]], "nbytes": [8, 8]}),
    ],
)
def test_tensor_violations(reason: str, changes: dict) -> None:
    frames = encode(5, TAG, {"w": np.zeros(2, np.float32), "v": np.zeros(3, np.float32)})
    assert reason_of(with_header(frames, **changes)) == reason


def test_header_size_and_structure_violations() -> None:
    frames = valid_frames()
    assert reason_of(frames, WireLimits(8, 1 << 20, max_header_bytes=64)) == "header_too_large"
    assert reason_of([b"\xc1", *frames[1:]]) == "bad_msgpack"  # a byte msgpack never uses
    assert reason_of([frames[0][:-3], *frames[1:]]) == "bad_msgpack"  # truncated
    assert reason_of([frames[0] + b"\x00", *frames[1:]]) == "bad_msgpack"  # trailing bytes
    assert reason_of([msgpack.packb({b"v": 1}), *frames[1:]]) == "bad_msgpack"  # bin type
    assert reason_of([msgpack.packb({1: 1})]) == "bad_msgpack"  # non-str key
    assert reason_of([msgpack.packb({"v": "x" * 300})]) == "bad_msgpack"  # long string
    assert reason_of([msgpack.packb([[[[[[[[1]]]]]]]] * 40)]) == "bad_msgpack"  # long array
    assert reason_of([msgpack.packb([1, 2])]) == "bad_header"
    assert reason_of([msgpack.packb(header_of(frames) | {"extra": 1})]) == "bad_msgpack"
    renamed = header_of(frames)
    renamed["codec_"] = renamed.pop("codec")
    assert reason_of([msgpack.packb(renamed), *frames[1:]]) == "bad_header"


def test_too_many_tensors_and_frame_counts() -> None:
    frames = valid_frames()
    assert reason_of(frames, WireLimits(max_tensors=2, max_message_bytes=1 << 20)) == (
        "too_many_tensors"
    )
    assert reason_of([]) == "frame_count"
    assert reason_of(frames[:-1]) == "frame_count"
    assert reason_of([*frames, b""]) == "frame_count"
    deep = with_header(frames[:2], names=["w"], dtypes=["float32"], shapes=[[1] * (MAX_NDIM + 1)])
    assert reason_of(deep) == "bad_msgpack"  # more dims than any array may hold


def test_unreadable_frames() -> None:
    frames = valid_frames()
    assert reason_of([frames[0], 12345, *frames[2:]]) == "bad_frame"
    strided = memoryview(np.zeros(96, dtype=np.uint8))[::2]
    assert reason_of([frames[0], strided, *frames[2:]]) == "bad_frame"


def _outcome(frames: list) -> str:
    """ "ok" or the refusal reason; any other exception fails the test."""
    try:
        message = decode(frames, LIMITS)
    except WireError as err:
        return err.reason
    assert isinstance(message, Message)
    return "ok"


def _mutated(frames: list, rng: random.Random) -> list:
    frames = [bytearray(frame) for frame in frames]
    for _ in range(rng.randint(1, 4)):
        target = frames[rng.randrange(len(frames))]
        op = rng.randrange(4)
        if op == 0 and target:
            target[rng.randrange(len(target))] = rng.randrange(256)
        elif op == 1:
            target.insert(rng.randrange(len(target) + 1), rng.randrange(256))
        elif op == 2 and target:
            del target[rng.randrange(len(target)) :]
        else:
            frames.insert(rng.randrange(len(frames) + 1), bytearray(rng.randbytes(8)))
    return frames


def test_fuzzed_mutations_only_ever_raise_wire_error() -> None:
    rng = random.Random(1234)
    base = valid_frames()
    outcomes = {_outcome(_mutated(base, rng)) for _ in range(600)}
    assert outcomes <= {"ok", *REASONS}
    assert len(outcomes) >= 5  # the mutations reach many different checks


def test_random_garbage_only_ever_raises_wire_error() -> None:
    rng = random.Random(99)
    for _ in range(300):
        frames = [rng.randbytes(rng.randrange(64)) for _ in range(rng.randint(0, 4))]
        assert _outcome(frames) != "ok"
    valid = header_of(valid_frames())
    for _ in range(300):  # well-formed msgpack: the real header with one field made random
        key = rng.choice(sorted(valid))
        header = valid | {key: _random_value(rng, depth=3)}
        assert _outcome([msgpack.packb(header), *valid_frames()[1:]]) in {"ok", *REASONS}


def _random_value(rng: random.Random, depth: int) -> object:
    leaves = [None, True, -1, 0, 2**40, 1.5, "", "float32", "x" * 70]
    if depth == 0 or rng.random() < 0.4:
        return rng.choice(leaves)
    items = [_random_value(rng, depth - 1) for _ in range(rng.randrange(4))]
    return items if rng.random() < 0.7 else {str(i): v for i, v in enumerate(items)}
