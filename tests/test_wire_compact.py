"""The wire codec's compact form (dfl_node/wire/compact.py): what a message costs, that every form
decodes to exactly what the self-describing form says, that what a receiver holds follows the
connection, and that every malformed message is refused with a documented reason and changes
nothing."""

from __future__ import annotations

import random

import numpy as np
import pytest

from dfl_node.wire.codec import Layouts, Message, WireError, WireLimits, decode, encode
from dfl_node.wire.compact import DEFINE, INLINE_MAX, MAX_LAYOUTS, SAME, SHAPES
from dfl_node.wire.message import DTYPE_CODES, MAX_NDIM, PROTOCOL_VERSION
from dfl_node.wire.session import Session
from dfl_node.wire.tags import Tag
from tests.test_wire import REASONS, sample_tensors

LIMITS = WireLimits(max_tensors=8, max_message_bytes=1 << 20)
PAIR = {"value": np.array([0.5], np.float32), "id": np.array([7], np.int64)}  # a consensus step
CONS, CTRL = 1, 2  # kind codes: indexes in KINDS
STEP, SLOT, INLINE = 0x10, 0x20, 0x40


def sent(wire: Session, dst: int, tag: Tag, tensors: dict[str, np.ndarray],
         src: int = 5) -> tuple[list[bytes], int]:
    """The frames `wire` sends `dst` for this message, as bytes, and its header bytes."""
    out, _ = wire.encode(src, tag, tensors)
    frames, framing = wire.frames(dst, out)
    return [bytes(frame) for frame in frames], framing


def assert_same_message(got: Message, want: Message) -> None:
    assert (got.src, got.tag, got.codec, got.payload_bytes) == (
        want.src, want.tag, want.codec, want.payload_bytes)
    assert list(got.tensors) == list(want.tensors)
    for name, array in want.tensors.items():
        mine = got.tensors[name]
        assert (mine.dtype, mine.shape, mine.tobytes()) == (array.dtype, array.shape,
                                                            array.tobytes())
        assert not mine.flags.writeable


def reference(tag: Tag, tensors: dict[str, np.ndarray], src: int = 5) -> Message:
    return decode([bytes(frame) for frame in encode(src, tag, tensors)], LIMITS)


def test_a_consensus_step_costs_its_definition_once_then_four_or_five_header_bytes() -> None:
    wire, held = Session(LIMITS), Layouts()
    framings = []
    for r in range(2):
        for k in range(10):
            tag = Tag("cons", r, "psi", step=k)
            frames, framing = sent(wire, 1, tag, PAIR)
            assert len(frames) == 1  # the 12 payload bytes travel in the header's frame
            message = decode(frames, LIMITS, held)
            assert_same_message(message, reference(tag, PAIR))
            assert message.framing_bytes == framing == len(frames[0]) - 12
            framings.append(framing)
    definition = 5 + 1 + 4 + 4 + 1 + (6 + 1 + 1 + 1) + (3 + 1 + 1 + 1)
    assert framings == [definition - 1, *[5] * 9, 4, *[5] * 9]  # step 0 is not sent
    frames, _ = sent(wire, 1, Tag("cons", 3, "psi", step=2), PAIR)
    assert frames[0][:5] == bytes([CONS | SAME << 2 | STEP | INLINE, 5, 3, 2, 0])
    assert frames[0][5:] == PAIR["value"].tobytes() + PAIR["id"].tobytes()


def test_the_definition_is_the_documented_layout() -> None:
    frames, framing = sent(Session(LIMITS), 1, Tag("ctrl", 300, "hello", slot=2),
                           {"x": np.zeros((2, 3), np.float32)}, src=9)
    header = bytes([CTRL | DEFINE << 2 | SLOT | INLINE, 9, 0xAC, 0x02, 2, 0, PROTOCOL_VERSION,
                    3, *b"raw", 5, *b"hello", 1, 1, *b"x", DTYPE_CODES.index("float32"), 2, 2, 3])
    assert framing == len(header) and frames == [header + bytes(24)]


@pytest.mark.parametrize("tensors", [
    pytest.param(sample_tensors(), id="small, inline"),
    pytest.param({"w": np.arange(INLINE_MAX // 4 + 1, dtype=np.float32), "b": np.ones(3)},
                 id="large, own frames"),
    pytest.param({}, id="no tensors"),
])
def test_every_form_decodes_to_what_the_self_describing_form_says(tensors: dict) -> None:
    wire, held = Session(LIMITS), Layouts()
    grown = {name: np.concatenate([array, array]) if array.ndim else array
             for name, array in tensors.items()}  # other shapes, the same layout
    modes = []
    for r, arrays in enumerate([tensors, tensors, grown, grown, tensors]):
        tag = Tag("data", r, "gossip", step=r % 2, slot=r % 3)
        out, own = wire.encode(5, tag, arrays)
        assert_same_message(own, reference(tag, arrays))  # the sender's own check
        frames, framing = wire.frames(1, out)
        modes.append((frames[0][0] >> 2) & 3)
        message = decode([bytes(frame) for frame in frames], LIMITS, held)
        assert_same_message(message, reference(tag, arrays))
        assert message.framing_bytes == framing
        assert len(message.tensor_frames) == len(arrays)
    changed = any(array.size for array in tensors.values())
    assert modes == [DEFINE, SAME, SHAPES if changed else SAME, SAME,
                     SHAPES if changed else SAME]


def test_large_tensors_go_out_and_come_in_without_a_copy() -> None:
    w = np.arange(INLINE_MAX, dtype=np.float32)
    out, _ = Session(LIMITS).encode(0, Tag("data", 0, "p"), {"w": w})
    frames, _ = out.frames(DEFINE)
    assert len(frames) == 2 and np.shares_memory(np.frombuffer(frames[1], np.uint8), w)
    received = [bytes(frames[0]), bytearray(frames[1])]
    got = decode(received, LIMITS)
    assert np.shares_memory(got.tensors["w"], np.frombuffer(received[1], np.uint8))
    assert got.tensor_frames == (received[1],)


def test_each_destination_gets_the_form_it_can_read() -> None:
    wire = Session(LIMITS)

    def modes(r: int, dsts: list[int]) -> list[int]:
        out, _ = wire.encode(5, Tag("data", r, "gossip"), {"w": np.zeros(4, np.float32)})
        return [wire.frames(dst, out)[0][0][0] >> 2 & 3 for dst in dsts]

    assert modes(0, [1, 2]) == [DEFINE, DEFINE]
    assert modes(1, [1, 2, 3]) == [SAME, SAME, DEFINE]
    wire.lost(2)  # its queue was dropped, definitions perhaps with it
    assert modes(2, [1, 2, 3]) == [SAME, DEFINE, SAME]
    wire.restart()
    assert modes(3, [1, 2, 3]) == [DEFINE, DEFINE, DEFINE]
    assert modes(4, [1, 2, 3]) == [SAME, SAME, SAME]


def test_after_a_restart_a_node_sends_what_a_fresh_one_does() -> None:
    """Comm restarts its session at every round a run may resume from (`resume_every`), so from
    there on a resumed node's bytes, and so its ledger, equal an uninterrupted one's."""

    def rounds(wire: Session, first: int, restarts: set[int]) -> list[list[bytes]]:
        out = []
        for r in range(first, 6):
            if r in restarts:
                wire.restart()
            out += [sent(wire, 1, Tag("cons", r, "psi", step=k), PAIR)[0] for k in range(3)]
            out.append(sent(wire, 1, Tag("ctrl", r, "model/end"), {})[0])
        return out

    uninterrupted = rounds(Session(LIMITS), 0, {0, 2, 4})
    resumed = Session(LIMITS)
    sent(resumed, 1, Tag("ctrl", 2, "hello"), {})  # its start-up, before its first round
    assert rounds(resumed, 2, {2, 4}) == uninterrupted[8:]


def test_more_layouts_than_ids_reuse_the_least_recently_used() -> None:
    wire, held = Session(LIMITS), Layouts()
    phases = [f"p{i}" for i in range(MAX_LAYOUTS + 1)] + ["p1", "p0", "p1"]
    modes = []
    for r, phase in enumerate(phases):
        tag = Tag("data", r, phase)
        frames, _ = sent(wire, 1, tag, {phase: np.full(2, r, np.int16)})
        modes.append((frames[0][0] >> 2) & 3)
        assert_same_message(decode(frames, LIMITS, held), reference(tag, {phase: np.full(2, r,
                                                                                          np.int16)}))
    # p16 took p0's id; p1 is still held, and p0 takes the id of the oldest then, p2
    assert modes == [DEFINE] * (MAX_LAYOUTS + 1) + [SAME, DEFINE, SAME]
    assert len(held) == MAX_LAYOUTS


def test_what_each_neighbour_defined_stays_its_own() -> None:
    """Node 2 redefines the id node 1 uses: node 1's next message still reads as it meant."""
    receiver = Session(LIMITS)
    one, two = Session(LIMITS), Session(LIMITS)
    frames, _ = sent(one, 0, Tag("cons", 0, "psi"), PAIR, src=1)
    receiver.decode(1, frames)
    frames, _ = sent(two, 0, Tag("data", 0, "evil"), {"x": np.zeros(3, np.float32)}, src=2)
    receiver.decode(2, frames)
    tag = Tag("cons", 0, "psi", step=1)
    frames, _ = sent(one, 0, tag, PAIR, src=1)
    assert_same_message(receiver.decode(1, frames), reference(tag, PAIR, src=1))


def test_the_senders_check_refuses_what_receivers_would_and_recovers() -> None:
    wire = Session(WireLimits(max_tensors=2, max_message_bytes=64))
    with pytest.raises(WireError, match="too_large"):
        wire.encode(0, Tag("data", 0, "p"), {"w": np.zeros(17, np.float32)})
    with pytest.raises(WireError, match="too_many_tensors"):
        wire.encode(0, Tag("data", 0, "p"), dict.fromkeys("abc", np.zeros(1)))
    for r in range(2):
        _, message = wire.encode(0, Tag("data", r, "p"), {"w": np.ones(16, np.float32)})
        assert message.payload_bytes == 64


def test_self_describing_headers_never_start_like_a_compact_one() -> None:
    assert encode(0, Tag("data", 0, "p"), {})[0][0] >= 0x80  # a msgpack map


# ----------------------------------------------------------------------------- refusals


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def text(raw: bytes) -> bytes:
    return varint(len(raw)) + raw


TENSORS = [(b"value", 0, [1]), (b"id", 7, [1])]  # name, dtype code, dims: PAIR's layout


def compact(*, kind: int = CONS, mode: int = DEFINE, src: bytes = b"\x05", rnd: bytes = b"\x03",
            layout_id: int = 0, version: int = PROTOCOL_VERSION, codec: bytes = b"raw",
            phase: bytes = b"psi", count: int | None = None,
            tensors: list[tuple[bytes, int, list[int]]] = TENSORS, ndims: list[int] | None = None,
            inline: bool = True, payload: bytes | None = None, extra: bytes = b"",
            frames: list[bytes] | None = None) -> list[bytes]:
    """A compact message built by hand from the documented layout, any field made wrong."""
    head = bytes([kind | mode << 2 | (INLINE if inline else 0)]) + src + rnd + bytes([layout_id])
    if mode == DEFINE:
        head += bytes([version]) + text(codec) + text(phase)
        head += varint(len(tensors) if count is None else count)
        for i, (name, code, dims) in enumerate(tensors):
            ndim = len(dims) if ndims is None else ndims[i]
            head += text(name) + bytes([code, ndim]) + b"".join(map(varint, dims))
    elif mode == SHAPES:
        head += b"".join(varint(dim) for _, _, dims in tensors for dim in dims)
    head += extra
    if payload is None:
        payload = PAIR["value"].tobytes() + PAIR["id"].tobytes()
    if inline:
        return [head + payload, *(frames or [])]
    return [head, *(frames if frames is not None else [payload[:4], payload[4:]])]


def reason_of(frames: list[bytes], limits: WireLimits = LIMITS,
              held: Layouts | None = None) -> str:
    with pytest.raises(WireError) as info:
        decode(frames, limits, held)
    return info.value.reason


def test_the_hand_built_message_is_valid() -> None:
    assert_same_message(decode(compact(), LIMITS), reference(Tag("cons", 3, "psi"), PAIR))
    assert_same_message(decode(compact(inline=False), LIMITS), reference(Tag("cons", 3, "psi"),
                                                                          PAIR))


LONG = bytes([0xFF] * 10 + [0x01])
BAD_UTF8 = b"\xff\xfe"


@pytest.mark.parametrize(("reason", "fields"), [
    ("bad_kind", {"kind": 3}),
    ("bad_header", {"mode": 3}),
    ("bad_header", {"layout_id": MAX_LAYOUTS}),
    ("bad_header", {"src": b"\x85\x00"}),  # non-canonical varint
    ("bad_header", {"rnd": LONG}),  # more than 64 bits
    ("bad_header", {"phase": b"p" * 65}),
    ("bad_header", {"phase": BAD_UTF8}),
    ("bad_header", {"inline": False, "extra": b"\x00"}),  # bytes after the header
    ("bad_version", {"version": PROTOCOL_VERSION - 1}),
    ("bad_version", {"version": PROTOCOL_VERSION + 1}),
    ("bad_codec", {"codec": b"zstd"}),
    ("bad_codec", {"codec": BAD_UTF8}),
    ("too_many_tensors", {"tensors": [(b"t%d" % i, 4, [0]) for i in range(9)], "payload": b""}),
    ("bad_name", {"tensors": [(b"", 0, [1]), (b"id", 7, [1])]}),
    ("bad_name", {"tensors": [(b"id", 0, [1]), (b"id", 7, [1])]}),
    ("bad_name", {"tensors": [(BAD_UTF8, 0, [1]), (b"id", 7, [1])]}),
    ("bad_name", {"tensors": [(b"n" * 257, 0, [1]), (b"id", 7, [1])]}),
    ("bad_dtype", {"tensors": [(b"value", len(DTYPE_CODES), [1]), (b"id", 7, [1])]}),
    ("bad_shape", {"tensors": [(b"value", 0, [1] * (MAX_NDIM + 1)), (b"id", 7, [1])]}),
    ("bad_shape", {"tensors": [(b"value", 0, [0, 10**12]), (b"id", 7, [1])]}),
    ("too_large", {"tensors": [(b"value", 0, [300_000]), (b"id", 7, [1])]}),
    ("frame_count", {"frames": [b""]}),  # inline, and a frame more
    ("frame_count", {"inline": False, "frames": [bytes(4)]}),
    ("length_mismatch", {"payload": bytes(11)}),
    ("length_mismatch", {"payload": bytes(13)}),
    ("length_mismatch", {"inline": False, "frames": [bytes(4), bytes(9)]}),
])  # fmt: skip
def test_malformed_definitions_are_refused(reason: str, fields: dict) -> None:
    assert reason_of(compact(**fields)) == reason


def test_truncated_headers_are_refused() -> None:
    header = compact(inline=False)[0]
    for cut in range(1, len(header)):
        assert reason_of([header[:cut], bytes(4), bytes(8)]) in {"bad_header", "length_mismatch",
                                                                 "frame_count"}


def test_header_caps() -> None:
    assert reason_of(compact(), WireLimits(8, 1 << 20, max_header_bytes=16)) == "header_too_large"
    huge = compact(payload=bytes(INLINE_MAX + 65537))
    assert reason_of(huge) == "header_too_large"  # refused before it is parsed


def test_references_need_a_definition_on_the_same_connection() -> None:
    assert reason_of(compact(mode=SAME)) == "unknown_layout"  # no connection state at all
    held = Layouts()
    assert reason_of(compact(mode=SAME), held=held) == "unknown_layout"
    assert reason_of(compact(mode=SHAPES), held=held) == "unknown_layout"
    decode(compact(), LIMITS, held)
    assert reason_of(compact(mode=SAME, layout_id=1), held=held) == "unknown_layout"
    decode(compact(mode=SAME), LIMITS, held)
    three = [(b"value", 0, [3]), (b"id", 7, [1])]  # other dims, as many of them
    payload = bytes(20)
    got = decode(compact(mode=SHAPES, tensors=three, payload=payload), LIMITS, held)
    assert got.tensors["value"].shape == (3,)
    assert decode(compact(mode=SAME, payload=payload), LIMITS, held).tensors["value"].shape == (
        3,)  # the new shapes are held
    assert reason_of(compact(mode=SHAPES, tensors=[(b"value", 0, [2]), (b"id", 7, [1])]),
                     held=held) == "length_mismatch"


def test_a_refused_message_changes_nothing_held() -> None:
    held = Layouts()
    decode(compact(), LIMITS, held)
    other = [(b"x", 0, [5])]
    assert reason_of(compact(tensors=other, payload=bytes(19)), held=held) == "length_mismatch"
    assert reason_of(compact(mode=SHAPES, tensors=[(b"v", 0, [2]), (b"i", 7, [2])]),
                     held=held) == "length_mismatch"
    assert_same_message(decode(compact(mode=SAME), LIMITS, held),
                        reference(Tag("cons", 3, "psi"), PAIR))


def snapshot(held: Layouts) -> list[object]:
    return [held.get(i) for i in range(MAX_LAYOUTS)]


def test_fuzzed_compact_messages_only_raise_wire_error_and_refusals_change_nothing() -> None:
    rng = random.Random(2024)
    wire, held = Session(LIMITS), Layouts()
    streams = [(Tag("cons", r, "psi", step=k), PAIR) for r in range(3) for k in range(3)]
    streams += [(Tag("data", r, "gossip"), {"w": np.arange(r + 1, dtype=np.float32)})
                for r in range(3)]
    streams += [(Tag("data", 0, "big"), {"w": np.zeros(INLINE_MAX, np.uint8), "k": np.ones(2)})]
    outcomes = set()
    for tag, tensors in streams:
        frames, _ = sent(wire, 1, tag, tensors)
        for _ in range(150):
            mutated = mutate(frames, rng)
            before = snapshot(held)
            trial = held.copy()
            try:
                decode(mutated, LIMITS, trial)
                outcomes.add("ok")
            except WireError as err:
                assert err.reason in REASONS, err.reason
                outcomes.add(err.reason)
                assert snapshot(trial) == before
        decode(frames, LIMITS, held)  # the real message, in order
    assert len(outcomes) >= 6


def mutate(frames: list[bytes], rng: random.Random) -> list[bytes]:
    out = [bytearray(frame) for frame in frames]
    for _ in range(rng.randint(1, 3)):
        target = out[rng.randrange(len(out))]
        op = rng.randrange(4)
        if op == 0 and target:
            target[rng.randrange(len(target))] = rng.randrange(256)
        elif op == 1:
            target.insert(rng.randrange(len(target) + 1), rng.randrange(256))
        elif op == 2 and target:
            del target[rng.randrange(len(target)):]
        else:
            out.insert(rng.randrange(len(out) + 1), bytearray(rng.randbytes(rng.randrange(9))))
    return [bytes(frame) for frame in out]


def test_random_compact_garbage_is_refused() -> None:
    rng = random.Random(7)
    held = Layouts()
    decode(compact(), LIMITS, held)
    for _ in range(500):
        first = bytes([rng.randrange(0x80)]) + rng.randbytes(rng.randrange(40))
        frames = [first, *(rng.randbytes(rng.randrange(16)) for _ in range(rng.randrange(3)))]
        try:
            decode(frames, LIMITS, held.copy())
        except WireError as err:
            assert err.reason in REASONS
