"""Compressors: Top-k and Q_b properties, common-copy decoding, position-coding size, hostility."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pytest
import torch

from dfl_node.learning.flat import flatten, unflatten_into
from dfl_node.wire.codec import WireLimits, decode, encode
from dfl_node.wire.tags import Tag
from protocols.toolkit.compressor_configs import (
    QUANTIZER_GROUP,
    SHIPPED,
    SPARSIFIER_GROUP,
    RandKConfig,
    SparsifierConfig,
    TopKConfig,
    UniformConfig,
    build_compressor,
    compressor_config,
    discover,
)
from protocols.toolkit.compressors import (
    Composed,
    Compressed,
    CompressionError,
    Compressor,
    Identity,
    MessageAccounting,
    RandK,
    TopK,
    Uniform,
)
from protocols.toolkit.positions import (
    POSITION_NAMES,
    ceil_log2,
    decode_positions,
    encode_positions,
    pack_uint,
    position_bytes,
    rice_parameter,
    unpack_uint,
)
from tests.harness import ENV_ROOT, ROOT

P = 1000
CIFAR_P = 2_122_186
LIMITS = WireLimits(max_tensors=8, max_message_bytes=1 << 24)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def vectors() -> dict[str, torch.Tensor]:
    """The four kinds the issue names: random, tied, all-zero and one-nonzero."""
    tied = torch.zeros(P)
    tied[::3] = 0.5
    tied[1::7] = -0.5
    tied[5] = 2.0
    one = torch.zeros(P)
    one[417] = -3.25
    return {
        "random": torch.randn(P, generator=gen(1)),
        "tied": tied,
        "zero": torch.zeros(P),
        "one": one,
    }


VECTORS = vectors()
COMPRESSORS: dict[str, Compressor] = {
    "identity": Identity(),
    "topk": TopK(ratio=0.05),
    "randk": RandK(ratio=0.3),
    "uniform8": Uniform(bits=8),
    "uniform3-stochastic": Uniform(bits=3, rounding="stochastic"),
    "q8-topk": Composed(TopK(ratio=0.01), Uniform(bits=8)),
    "q4-randk": Composed(RandK(k=64), Uniform(bits=4, rounding="stochastic")),
}


# Top-k


@pytest.mark.parametrize("name", list(VECTORS))
@pytest.mark.parametrize("k", [1, 3, 50, 400, P])
def test_topk_keeps_the_largest_min_k_nnz_entries(name: str, k: int) -> None:
    v = VECTORS[name]
    compressor = TopK(k=k)
    c = compressor.compress(v)
    out = compressor.decompress(c.tensors, P)
    nnz = int((v != 0).sum())
    kept = np.flatnonzero(out.numpy())
    assert c.k == len(kept) == min(k, nnz)
    assert torch.equal(out[kept], v[kept])  # unquantised: the kept values are exact
    dropped = np.setdiff1d(np.arange(P), kept)
    if len(kept) and len(dropped):
        assert v.abs()[kept].min() >= v.abs()[dropped].max()
    assert out.square().sum() >= (k / P) * v.square().sum()


def test_topk_breaks_ties_by_lower_position() -> None:
    v = torch.tensor([1.0, -3.0, 3.0, 2.0, -3.0, 3.0, 0.0, 3.0])
    out = TopK(k=3).decompress(TopK(k=3).compress(v).tensors, 8)
    assert out.tolist() == [0, -3.0, 3.0, 0, -3.0, 0, 0, 0]


def test_budget_reads_the_ratio_as_written() -> None:
    assert TopK(ratio=0.07).budget(100) == 7  # binary 0.07 * 100 would round up to 8
    assert TopK(ratio=0.01).budget(CIFAR_P) == 21_222
    assert TopK(ratio=1e-9).budget(10) == 1
    assert TopK(k=5).max_k(3) == 3


# Q_b


@pytest.mark.parametrize("bits", [1, 2, 4, 8, 12])
@pytest.mark.parametrize("name", list(VECTORS))
def test_uniform_keeps_zeros_and_stays_within_half_a_step(bits: int, name: str) -> None:
    v = VECTORS[name]
    q = Uniform(bits=bits)
    out = q.decompress(q.compress(v).tensors, P)
    assert torch.equal(out == 0, v == 0)  # support preserved: zeros stay zero, others stay
    if v.any():
        s_max = float(v.abs().max())
        # within s/(2^b - 1), plus at most half a float32 ulp from the final cast
        bound = s_max / (2**bits - 1) + float(np.spacing(np.float32(s_max))) / 2
        assert float((out - v).abs().max()) <= bound
        assert float(out.abs().max()) == s_max  # the endpoints are exact


def test_uniform_grid_is_symmetric_and_exact_at_the_ends() -> None:
    v = torch.tensor([-2.0, 2.0, 1.0, -1.0, 0.0, 0.25])
    out = Uniform(bits=2).decompress(Uniform(bits=2).compress(v).tensors, 6)
    third = np.float32(2.0 * (1 / 3))  # levels -2, -2/3, 2/3, 2
    assert out.tolist() == [-2.0, 2.0, third, -third, 0.0, third]


def test_stochastic_rounding_is_unbiased_within_one_step_and_seeded() -> None:
    q = Uniform(bits=2, rounding="stochastic")
    v = torch.full((20_000,), 0.2)
    v[0] = 1.0  # s_max = 1: levels -1, -1/3, 1/3, 1
    out = q.decompress(q.compress(v, gen(3)).tensors, len(v))
    assert float((out - v).abs().max()) <= 2 / 3 + 1e-7
    assert abs(float(out[1:].mean()) - 0.2) < 0.01
    again = q.decompress(q.compress(v, gen(3)).tensors, len(v))
    assert torch.equal(out, again)
    with pytest.raises(ValueError, match="Generator"):
        q.compress(v)


def test_composed_is_q_of_topk() -> None:
    v = VECTORS["random"]
    composed = Composed(TopK(k=20), Uniform(bits=8))
    expected = Uniform(bits=8).compress(TopK(k=20).decompress(TopK(k=20).compress(v).tensors, P))
    c = composed.compress(v)
    assert c.quantized and c.k == 20
    assert torch.equal(
        composed.decompress(c.tensors, P), Uniform(bits=8).decompress(expected.tensors, P)
    )


def test_randk_draws_from_the_generator_and_sends_only_nonzeros() -> None:
    v = VECTORS["tied"]
    a, b = RandK(k=100).compress(v, gen(5)), RandK(k=100).compress(v, gen(5))
    assert all(np.array_equal(a.tensors[n], b.tensors[n]) for n in a.tensors)
    out = RandK(k=100).decompress(a.tensors, P)
    kept = out != 0
    assert a.k == int(kept.sum()) <= 100
    assert torch.equal(out[kept], v[kept])
    with pytest.raises(ValueError, match="Generator"):
        RandK(k=100).compress(v)


# The common copy: the sender's decoding equals every receiver's, through the real codec


@pytest.mark.parametrize("name", list(VECTORS))
@pytest.mark.parametrize("kind", list(COMPRESSORS))
def test_sender_and_receiver_decode_identically(kind: str, name: str) -> None:
    compressor = COMPRESSORS[kind]
    c = compressor.compress(VECTORS[name], gen(7))
    mine = compressor.decompress(c.tensors, P)
    message = decode(encode(3, Tag("data", 0, "model"), c.tensors), LIMITS)
    received = {n: torch.from_numpy(a.copy()) for n, a in message.tensors.items()}
    theirs = compressor.decompress(received, P)
    assert mine.numpy().tobytes() == theirs.numpy().tobytes()
    assert message.payload_bytes == c.payload_bytes
    if not VECTORS[name].any():
        assert not mine.any()
        assert c.position_coding == ("dense" if kind == "identity" else "none")


# Position coding and the paper's bit count


def supports(size: int, k: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(size * 7919 + k)
    return {
        "random": np.sort(rng.choice(size, k, replace=False)),
        "even": np.arange(k) * (size - 1) // max(k - 1, 1),
        "block": np.arange(size - k, size),
        "ends": np.unique(np.r_[np.arange(k // 2), np.arange(size - (k - k // 2), size)]),
    }


@pytest.mark.parametrize("size", [1, 2, 3, 7, 8, 9, 100, 1000, 4096, 65_537, 100_003])
def test_position_coding_never_exceeds_the_formula(size: int) -> None:
    for k in sorted({1, 2, 3, size // 100, size // 22, size // 8, size // 2, size} - {0}):
        if k > size:
            continue
        for shape, positions in supports(size, k).items():
            coding, tensors = encode_positions(positions, size)
            formula = min(k * ceil_log2(size), size)
            wire = sum(tensors[name].nbytes for name in POSITION_NAMES[coding])
            assert wire == position_bytes(coding, positions, size)
            assert 8 * wire <= 8 * math.ceil(formula / 8), (size, k, shape, coding)
            assert np.array_equal(decode_positions(tensors, len(positions), size), positions)


def test_the_cifar_cnn_bit_counts() -> None:
    """P = 2,122,186 and ratio 0.01 give k = 21,222 (inferred from the paper's omega)."""
    compressor = build_compressor(compressor_config({
        "sparsifier": {"type": "topk", "ratio": 0.01, "scope": "global"},
        "quantizer": {"type": "uniform", "bits": 8, "rounding": "nearest"},
    }))  # fmt: skip
    v = torch.randn(CIFAR_P, generator=gen(0))
    c = compressor.compress(v)
    assert (c.k, c.size, c.quantized) == (21_222, CIFAR_P, True)
    assert c.payload(MessageAccounting()).bits == {
        "values": 169_776, "positions": 21_222 * 22, "scale": 32, "header": 32, "trigger": 0,
    }  # fmt: skip
    assert compressor.largest_bits(CIFAR_P, MessageAccounting()) == 169_776 + 466_884 + 64
    assert ceil_log2(CIFAR_P) == 22 and 21_222 * 22 == 466_884
    assert c.position_coding == "delta"
    assert 8 * c.position_bytes < 0.4 * 466_884  # about 8 bits per position instead of 22
    assert c.tensors["codes"].nbytes == 21_222 and c.tensors["scale"].nbytes == 4
    dense = Identity().compress(v)
    assert dense.payload(MessageAccounting(b_hdr=0)).bits == {
        "values": 32 * CIFAR_P, "positions": 0, "scale": 0, "header": 0, "trigger": 0,
    }  # fmt: skip


def test_formula_charges_an_empty_quantised_message_its_scale() -> None:
    c = Composed(TopK(k=5), Uniform()).compress(torch.zeros(10))
    assert (c.k, c.position_coding) == (0, "none")
    acc = MessageAccounting(b_hdr=0, b_trig=1)
    assert c.payload(acc).bits == {"values": 0, "positions": 0, "scale": 32, "header": 0,
                                   "trigger": 1}
    assert TopK(k=5).compress(torch.zeros(10)).payload(acc).bits["scale"] == 0


def test_a_message_states_its_bits_under_its_accounting() -> None:
    """b_q follows the compressor unless the accounting sets it; the payload carries the very
    tensors the wire carries."""
    v = torch.randn(P, generator=gen(4))
    c = Composed(TopK(k=100), Uniform(bits=4)).compress(v)
    payload = c.payload(MessageAccounting())
    assert payload.bits["values"] == 4 * 100 and payload.bits["positions"] == 100 * 10
    assert c.payload(MessageAccounting(b_q=8)).bits["values"] == 8 * 100
    assert sorted(payload.tensors) == sorted(c.tensors)
    for name, array in c.tensors.items():
        assert payload.tensors[name].numpy().tobytes() == array.tobytes()
    full = TopK(k=P).compress(v)
    assert full.payload(MessageAccounting()).bits["positions"] == P  # the P-bit mask
    assert full.payload(MessageAccounting(dense_skip_mask=True)).bits["positions"] == 0


# Hostile input


def valid(kind: str = "q8-topk", name: str = "random") -> Compressed:
    return COMPRESSORS[kind].compress(VECTORS[name], gen(0))


def with_positions(coding: str, positions: list[int]) -> dict[str, np.ndarray]:
    """A well-formed Top-k message (P entries) whose positions use `coding`."""
    array = np.asarray(positions, np.int64)
    if coding == "bitmap":
        mask = np.zeros(P, np.uint8)
        mask[array] = 1
        tensors = {"bitmap": np.packbits(mask)}
    else:
        chosen, tensors = encode_positions(array, P)
        assert chosen == coding
    return {"k": np.array([len(array)], np.int32), **tensors,
            "values": np.ones(len(array), np.float32)}  # fmt: skip


def delta_message(k: int, unary: list[int], remainders: list[int]) -> dict[str, np.ndarray]:
    """A hand-made delta-coded Top-k message (P entries) with these streams."""
    r = rice_parameter(k, P)
    return {"k": np.array([k], np.int32), "delta_q": np.array(unary, np.uint8),
            "delta_r": pack_uint(np.array(remainders), r),
            "values": np.ones(k, np.float32)}  # fmt: skip


def mutated(tensors: dict[str, np.ndarray], **changes: np.ndarray | None) -> dict[str, np.ndarray]:
    out = dict(tensors)
    for name, value in changes.items():
        if value is None:
            del out[name]
        else:
            out[name] = value
    return out


def test_well_formed_messages_pass_validation() -> None:
    for coding, positions in (("bitmap", list(range(0, P, 2))), ("index", [3, 999]),
                              ("delta", list(range(10, 200, 9)))):  # fmt: skip
        TopK(k=P).validate(with_positions(coding, positions), P)


@pytest.mark.parametrize(
    ("compressor", "tensors", "match"),
    [
        (TopK(k=P), {"k": np.array([1], np.int32)}, "expected exactly one position coding"),
        (TopK(k=2), with_positions("index", [3, 999, 5][:2]) | {"extra": np.zeros(1)}, "extra"),
        (TopK(k=1), with_positions("index", [3, 999]), "outside"),
        (
            TopK(k=P),
            mutated(with_positions("index", [3, 999]), k=np.array([-1], np.int32)),
            "outside",
        ),
        (TopK(k=P), mutated(with_positions("index", [3, 999]), k=np.array([2], np.int64)), "int32"),
        (TopK(k=P), mutated(with_positions("index", [3, 999]), k=np.array([[2]], np.int32)), "1-D"),
        (TopK(k=P), mutated(with_positions("index", [3, 999]), values=None), "expected"),
        (
            TopK(k=P),
            with_positions("index", [3, 999]) | with_positions("bitmap", [3, 999]),
            "exactly one",
        ),
        (TopK(k=P), mutated(with_positions("bitmap", [3, 999]), k=np.array([3], np.int32)), "ones"),
        (
            TopK(k=P),
            mutated(with_positions("bitmap", [3]), bitmap=np.zeros(124, np.uint8)),
            "bytes",
        ),
        (
            TopK(k=P),
            mutated(with_positions("index", [3, 999]), index=pack_uint(np.array([999, 3]), 10)),
            "strictly increasing",
        ),
        (
            TopK(k=P),
            mutated(with_positions("index", [3, 999]), index=pack_uint(np.array([5, 5]), 10)),
            "strictly increasing",
        ),
        (
            TopK(k=P),
            mutated(with_positions("index", [3, 999]), index=pack_uint(np.array([3, 1000]), 10)),
            "< 1000",
        ),
        (
            TopK(k=P),
            mutated(with_positions("index", [3, 999]), index=np.array([0, 0xF9, 0xF1], np.uint8)),
            "padding",
        ),
        (
            TopK(k=P),
            mutated(with_positions("index", [3, 999]), index=np.zeros(4, np.uint8)),
            "bytes",
        ),
        (
            TopK(k=P),
            mutated(
                with_positions("delta", list(range(10, 200, 9))), delta_q=np.zeros(200, np.uint8)
            ),
            "bound",
        ),
        (
            TopK(k=P),
            mutated(with_positions("delta", list(range(10, 200, 9))), delta_q=np.ones(3, np.uint8)),
            "gaps",
        ),
        (TopK(k=P), delta_message(22, [255, 255, 252, 0], [8] * 22), "trailing"),
        (TopK(k=P), delta_message(1, [0b01000000], [511]), ">= P"),
        (
            TopK(k=P),
            mutated(
                delta_message(1, [0b10000000], [7]), delta_r=np.array([0, 0b01000000], np.uint8)
            ),
            "padding",
        ),
        (
            TopK(k=P),
            mutated(with_positions("index", [3, 999]), values=np.array([1, np.nan], np.float32)),
            "finite nonzero",
        ),
        (
            TopK(k=P),
            mutated(with_positions("index", [3, 999]), values=np.array([1, 0], np.float32)),
            "finite nonzero",
        ),
        (
            TopK(k=P),
            mutated(with_positions("index", [3, 999]), values=np.ones(3, np.float32)),
            "finite nonzero",
        ),
        (Identity(), {"values": np.ones(P - 1, np.float32)}, "finite"),
        (Identity(), {"values": np.full(P, np.inf, np.float32)}, "finite"),
        (Identity(), {"values": np.ones(P, np.float64)}, "float32"),
        (Identity(), {"w": np.ones(P, np.float32)}, "unexpected"),
    ],
)
def test_malformed_sparse_and_dense_payloads_are_refused(
    compressor: Compressor, tensors: dict[str, np.ndarray], match: str
) -> None:
    with pytest.raises(CompressionError, match=match):
        compressor.validate(tensors, P)
    with pytest.raises(CompressionError):
        compressor.decompress(tensors, P)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"scale": np.array([np.nan], np.float32)}, "scale"),
        ({"scale": np.array([np.inf], np.float32)}, "scale"),
        ({"scale": np.array([0.0], np.float32)}, "scale"),
        ({"scale": np.array([-1.0], np.float32)}, "scale"),
        ({"scale": np.array([1.0, 1.0], np.float32)}, "scale"),
        ({"scale": None}, "expected"),
        ({"codes": np.zeros(9, np.uint8)}, "codes"),
    ],
)
def test_malformed_quantised_payloads_are_refused(changes: dict, match: str) -> None:
    compressor = COMPRESSORS["q8-topk"]
    with pytest.raises(CompressionError, match=match):
        compressor.validate(mutated(valid().tensors, **changes), P)


def test_bitmap_padding_bits_must_be_zero() -> None:
    tensors: dict[str, np.ndarray] = {
        "k": np.array([1], np.int32), "bitmap": np.array([0, 0b10001000], np.uint8),
        "values": np.ones(1, np.float32)}  # fmt: skip
    with pytest.raises(CompressionError, match="padding"):
        TopK(k=2).validate(tensors, 12)
    TopK(k=2).validate(tensors | {"bitmap": np.array([0, 0b10000000], np.uint8)}, 12)


def test_code_padding_and_empty_scale_are_checked() -> None:
    q = Uniform(bits=3)
    c = q.compress(VECTORS["one"])  # one 3-bit code in one byte, 5 padding bits
    padded = mutated(c.tensors, codes=c.tensors["codes"] | np.uint8(1))
    with pytest.raises(CompressionError, match="padding"):
        q.validate(padded, P)
    empty = q.compress(VECTORS["zero"])
    q.validate(empty.tensors, P)
    with pytest.raises(CompressionError, match="scale"):
        q.validate(mutated(empty.tensors, scale=np.ones(1, np.float32)), P)


@pytest.mark.parametrize("kind", list(COMPRESSORS))
def test_random_corruption_raises_only_compression_errors(kind: str) -> None:
    """Flip bytes and lengths of valid messages: decoding either succeeds or says why not."""
    compressor = COMPRESSORS[kind]
    rng = np.random.default_rng(11)
    base = compressor.compress(VECTORS["random"], gen(0)).tensors
    for _ in range(300):
        tensors = {name: array.copy() for name, array in base.items()}
        name = list(tensors)[rng.integers(len(tensors))]
        raw = tensors[name].view(np.uint8)
        if rng.random() < 0.2:
            cut = rng.integers(0, len(tensors[name]) + 1)
            tensors[name] = tensors[name][:cut]
        elif raw.size:
            raw[rng.integers(raw.size)] = rng.integers(256)
        try:
            out = compressor.decompress(tensors, P)
        except CompressionError:
            continue
        assert out.shape == (P,) and bool(torch.isfinite(out).all())


# Inputs the sender must not compress, and configs


def test_compress_refuses_non_finite_and_misshaped_input() -> None:
    bad = torch.ones(4)
    bad[2] = float("nan")
    for v in (bad, torch.ones(2, 2), torch.ones(3, dtype=torch.float64), torch.ones(0)):
        with pytest.raises(ValueError):
            TopK(k=1).compress(v)


def test_identity_is_exact_including_signed_zeros() -> None:
    v = torch.tensor([0.0, -0.0, 1.5, -2.25])
    c = Identity().compress(v)
    assert (c.k, c.position_coding, c.position_bytes) == (4, "dense", 0)
    assert Identity().decompress(c.tensors, 4).numpy().tobytes() == v.numpy().tobytes()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"type": "identity"}, Identity()),
        ({"type": "topk", "ratio": 0.01}, TopK(ratio=0.01)),
        ({"type": "randk", "k": 7}, RandK(k=7)),
        ({"type": "uniform", "bits": 4, "rounding": "stochastic"}, Uniform(4, "stochastic")),
        (
            {"sparsifier": {"type": "topk", "ratio": 0.01}, "quantizer": {"type": "uniform"}},
            Composed(TopK(ratio=0.01), Uniform(8)),
        ),
        (
            {"sparsifier": None, "quantizer": {"type": "uniform", "scale": "per_message"}},
            Uniform(8),
        ),
        ({"sparsifier": {"type": "topk", "k": 3, "scope": "global"}}, TopK(k=3)),
        ({"sparsifier": None, "quantizer": None}, Identity()),
    ],
)
def test_build_compressor(spec: dict, expected: Compressor) -> None:
    assert build_compressor(compressor_config(spec)) == expected


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"type": "topq"}, r"compressor\.type: unknown 'topq' \(did you mean topk\?\)"),
        ({"type": "topk"}, "compressor: give exactly one of ratio and k"),
        ({"type": "topk", "ratio": 0.1, "k": 3}, "exactly one"),
        ({"type": "topk", "ratio": 0}, r"compressor\.ratio: must be a number in \(0, 1\]"),
        ({"type": "topk", "ratio": True}, "ratio: must be a number"),
        ({"type": "randk", "k": 2.5}, r"compressor\.k: input should be a valid integer"),
        ({"type": "topk", "ratio": 0.1, "scope": "layer"}, "scope: input should be 'global'"),
        ({"type": "uniform", "bits": 0}, r"compressor\.bits: must be an integer in 1\.\.16"),
        ({"type": "uniform", "rounding": "up"}, "rounding: input should be 'nearest' or"),
        ({"type": "uniform", "scale": "per_layer"}, "scale: input should be 'per_message'"),
        ({"type": "identity", "ratio": 1}, r"compressor\.ratio: unknown key"),
        ({"sparsifier": {"type": "uniform"}},
         r"compressor\.sparsifier\.type: unknown 'uniform' \(known: 'topk', 'randk'\)"),
        ({"quantizer": {"type": "topk", "k": 1}}, r"compressor\.quantizer\.type: input should"),
        ({"sparsifier": "topk"}, r"compressor\.sparsifier: input should be a valid dictionary"),
        ({"sparsfier": {"type": "topk", "k": 1}},
         r"compressor\.sparsfier: unknown key \(did you mean sparsifier\?\)"),
        ([1, 2], "compressor: input should be a valid dictionary"),
    ],
)
def test_compressor_configs_reject_bad_spellings_in_one_line(spec: object, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        compressor_config(spec)
    assert "\n" not in str(info.value)


def test_flatten_and_unflatten_round_trip_in_place() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    params = list(model.parameters())
    flat = flatten(params)
    assert flat.shape == (sum(p.numel() for p in params),)
    storage = [p.data_ptr() for p in params]
    unflatten_into(params, flat * 2)
    assert torch.equal(flatten(params), flat * 2)
    assert [p.data_ptr() for p in params] == storage
    with pytest.raises(ValueError, match="shape"):
        unflatten_into(params, flat[:-1])


# Plugins: sparsifier and quantizer specs from entry points

PLUGIN = '''\
from typing import Literal

from protocols.toolkit.compressor_configs import SparsifierConfig
from protocols.toolkit.compressors import TopK


class HalfConfig(SparsifierConfig):
    type: Literal["half"] = "half"

    def build(self) -> TopK:
        return TopK(ratio=0.5)


class OtherRandKConfig(SparsifierConfig):
    type: Literal["randk"] = "randk"

    def build(self) -> TopK:
        return TopK(k=1)
'''
PLUGIN_ENTRY_POINTS = '''\
[dfl_mesh.sparsifiers]
half = fakeplugin:HalfConfig
randk = fakeplugin:OtherRandKConfig
'''
PLUGIN_CHECK = '''\
from protocols.dmflsq.declarations import DMFLSQHyper
from protocols.toolkit.compressor_configs import REGISTERED, compressor_config
print(dict(REGISTERED.clashes))
hyper = DMFLSQHyper.model_validate({"compressor": {"sparsifier": {"type": "half"},
                                                   "quantizer": {"type": "uniform"}}})
print(hyper.compressor.build())
for spec in ({"type": "randk", "k": 3}, {"sparsifier": {"type": "randk", "k": 3}}):
    try:
        compressor_config(spec)
    except ValueError as exc:
        print(exc)
'''


def test_an_installed_sparsifier_joins_every_compressor_setting(tmp_path: Path) -> None:
    """A package registering under `dfl_mesh.sparsifiers` is usable wherever `compressor:` is;
    a type name it shares with dfl-mesh is refused, naming both packages."""
    (tmp_path / "fakeplugin.py").write_text(PLUGIN)
    info = tmp_path / "fakeplugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(PLUGIN_ENTRY_POINTS)
    proc = subprocess.run([sys.executable, "-c", PLUGIN_CHECK], capture_output=True, text=True,
                          env={**ENV_ROOT, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == [
        "{'randk': ('dfl-mesh', 'fakeplugin')}",
        "Composed(sparsifier=TopK(ratio=0.5, k=None), quantizer=Uniform(bits=8, "
        "rounding='nearest'))",
        "compressor: type 'randk' is registered by several packages (dfl-mesh and fakeplugin); "
        "uninstall one of them",
        "compressor.sparsifier: type 'randk' is registered by several packages (dfl-mesh and "
        "fakeplugin); uninstall one of them",
    ]


@dataclass(frozen=True)
class FakeDist:
    name: str


@dataclass(frozen=True)
class FakeEntryPoint:
    name: str
    value: object
    dist: FakeDist

    def load(self) -> object:
        return self.value


class HalfConfig(SparsifierConfig):
    type: Literal["half"] = "half"

    def build(self) -> TopK:
        return TopK(ratio=0.5)


def test_discovery_keeps_distinct_names_and_refuses_shared_ones() -> None:
    half = FakeEntryPoint("half", HalfConfig, FakeDist("halfpkg"))
    registered = discover(SHIPPED, {SPARSIFIER_GROUP: [half]})
    assert registered.sparsifiers == (TopKConfig, RandKConfig, HalfConfig)
    assert registered.quantizers == (UniformConfig,) and not registered.clashes
    # The same name from two packages, or in both groups: neither is kept.
    again = FakeEntryPoint("half", HalfConfig, FakeDist("copypkg"))
    registered = discover(SHIPPED, {SPARSIFIER_GROUP: [half], QUANTIZER_GROUP: [again]})
    assert registered.clashes == {"half": ("copypkg", "halfpkg")}
    assert HalfConfig not in registered.sparsifiers + registered.quantizers
    # An entry point that is not a spec class is left out, its reason kept (one line, naming
    # the package) for `dfl-launch plugins`: the shipped parts stay usable.
    bad = FakeEntryPoint("broken", TopK, FakeDist("badpkg"))
    contained = discover(SHIPPED, {SPARSIFIER_GROUP: [bad]})
    assert contained.sparsifiers == SHIPPED[SPARSIFIER_GROUP]
    assert list(contained.failed) == [f"{SPARSIFIER_GROUP}:broken"]
    assert "'broken' of badpkg in dfl_mesh.sparsifiers" in contained.failed[
        f"{SPARSIFIER_GROUP}:broken"]


def test_top_k_support_is_the_sorted_union_of_the_larger_magnitudes_and_the_first_ties(
) -> None:
    """The support as np.union1d built it (whose sort of 212k positions was most of a CHOCO-SGD
    round on the 2.1M-parameter CNN): the same positions, in order, ties to the lower ones."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        array = rng.integers(-4, 5, size=int(rng.integers(2, 3000))).astype(np.float32)
        top = TopK(ratio=float(rng.uniform(0.01, 1.0)))
        k, nonzero = top.max_k(array.size), np.flatnonzero(array)
        if nonzero.size <= k:
            expected = nonzero
        else:
            magnitudes = np.abs(array)
            kth = np.partition(magnitudes, array.size - k)[array.size - k]
            above = np.flatnonzero(magnitudes > kth)
            expected = np.union1d(above, np.flatnonzero(magnitudes == kth)[: k - above.size])
        got = top.support(array)
        assert got.dtype == expected.dtype and np.array_equal(got, expected)


@pytest.mark.parametrize("width", [1, 3, 7, 8, 9, 17, 31])
def test_packed_uints_come_back_as_written(width: int) -> None:
    values = np.random.default_rng(width).integers(0, 2**width, size=1001)
    back = unpack_uint(pack_uint(values, width), values.size, width, "x")
    assert back.dtype == np.int64 and np.array_equal(back, values)
