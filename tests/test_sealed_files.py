"""Sealed safetensors files (dfl_node/state/sealed_file.py): each carries the digest of its
tensors and metadata, stays plain safetensors, and fails its check for any changed byte."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from dfl_node.state import checkpoint_file as checkpoint
from dfl_node.state import sealed_file
from dfl_node.state.sealed_file import DIGEST_KEY, CorruptFile
from tests.checkpoint_damage import change_rng, flip_bit, truncate


def a_state() -> checkpoint.State:
    gen = torch.Generator().manual_seed(1)
    return checkpoint.State(
        {"model/w": torch.randn(64, 32, generator=gen), "model/b": torch.zeros(32),
         "steps": torch.tensor([3], dtype=torch.int64)},
        {"sampler": {"__numpy_generator__": {"bit_generator": "PCG64",
                                             "state": {"state": 12345, "inc": 7}}},
         "runtime": {"node": 2, "round": 4}})


def test_a_sealed_checkpoint_reads_back_and_stays_plain_safetensors(tmp_path: Path) -> None:
    path = tmp_path / "round-4.safetensors"
    digest = checkpoint.write(path, a_state())
    back = checkpoint.read(path, digest)
    assert back.meta == a_state().meta
    assert all(torch.equal(back.tensors[k], v) for k, v in a_state().tensors.items())
    assert sealed_file.verify(path).digest == digest
    with safe_open(str(path), framework="pt") as handle:  # any safetensors reader
        assert (handle.metadata() or {})[DIGEST_KEY] == digest
        assert torch.equal(handle.get_tensor("model/w"), a_state().tensors["model/w"])
    again = tmp_path / "again.safetensors"
    checkpoint.write(again, a_state())
    assert again.read_bytes() == path.read_bytes()  # a resumed run's files equal a clean run's
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_final_model_without_metadata_is_sealed_too(tmp_path: Path) -> None:
    path = tmp_path / "node-0.safetensors"
    digest = checkpoint.write_tensors(path, {"w": torch.ones(3)})
    assert sealed_file.verify(path).digest == digest
    assert sealed_file.verify(path).metadata == {}


@pytest.mark.parametrize(("damage", "reason"), [
    (flip_bit, "its bytes do not match its digest"),
    (change_rng, "its bytes do not match its digest"),
    (truncate, "truncated: "),
    (lambda p: p.write_bytes(p.read_bytes() + b"\0"), "too long: "),
    (lambda p: p.write_bytes(p.read_bytes()[:5]), "truncated: 5 bytes, not even a header"),
    (lambda p: p.write_bytes(b"\x10" + b"\0" * 7 + b"not json" * 2), "not a safetensors file"),
])
def test_any_changed_byte_fails_the_check_in_one_line(
        tmp_path: Path, damage: Callable[[Path], object], reason: str) -> None:
    path = tmp_path / "round-4.safetensors"
    checkpoint.write(path, a_state())
    damage(path)
    for check in (sealed_file.verify, checkpoint.read):
        with pytest.raises(CorruptFile) as caught:
            check(path)
        assert str(caught.value).startswith(f"{path}: ") and reason in str(caught.value)
        assert "\n" not in str(caught.value)


def test_a_file_without_a_digest_or_not_the_checked_one_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain.safetensors"
    save_file({"w": torch.ones(3)}, str(plain))
    with pytest.raises(CorruptFile, match="carries no digest"):
        sealed_file.verify(plain)
    path = tmp_path / "round-4.safetensors"
    checkpoint.write(path, a_state())
    with pytest.raises(CorruptFile, match="not the file --resume checked"):
        checkpoint.read(path, "0" * 64)
    with pytest.raises(CorruptFile, match="unreadable: "):
        sealed_file.verify(tmp_path / "missing.safetensors")
