"""Damage done to real checkpoint and final files the ways a disk, a copy or a hand does it:
one flipped bit in a tensor, a changed value in the JSON state (its digest left as it was), a
file of an older round copied under a newer round's name, a file cut short."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dfl_node.state.checkpoint_layout import META_KEY, checkpoint_path

LENGTH = struct.Struct("<Q")


def split(path: Path) -> tuple[dict[str, Any], bytes]:
    """A safetensors file's header (as JSON) and its tensor data."""
    data = path.read_bytes()
    (length,) = LENGTH.unpack_from(data)
    return json.loads(data[LENGTH.size:LENGTH.size + length]), data[LENGTH.size + length:]


def flip_bit(path: Path) -> str:
    """Flip the lowest bit of the first byte of the file's largest tensor (a weight); its
    name."""
    header, _ = split(path)
    name = max((k for k in header if k != "__metadata__"),
               key=lambda k: header[k]["data_offsets"][1] - header[k]["data_offsets"][0])
    data = bytearray(path.read_bytes())
    at = LENGTH.size + LENGTH.unpack_from(data)[0] + header[name]["data_offsets"][0]
    data[at] ^= 1
    path.write_bytes(bytes(data))
    return name


def edit_state(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Apply `edit` to a checkpoint's JSON state and write the file back with the digest it
    had: a value changed behind the writer's back."""
    header, tensors = split(path)
    state = json.loads(header["__metadata__"][META_KEY])
    edit(state)
    header["__metadata__"][META_KEY] = json.dumps(state, sort_keys=True)
    head = json.dumps(header).encode()
    head += b" " * (-(LENGTH.size + len(head)) % 8)
    path.write_bytes(LENGTH.pack(len(head)) + head + tensors)


def bump_numpy_rng(state: Any) -> bool:
    """Add one to the first numpy generator state found in a checkpoint's JSON state."""
    if isinstance(state, dict):
        if "__numpy_generator__" in state:
            state["__numpy_generator__"]["state"]["state"] += 1
            return True
        return any(bump_numpy_rng(v) for v in state.values())
    if isinstance(state, list):
        return any(bump_numpy_rng(v) for v in state)
    return False


def change_rng(path: Path) -> None:
    def edit(state: dict[str, Any]) -> None:
        assert bump_numpy_rng(state), f"{path} holds no numpy generator"

    edit_state(path, edit)


def truncate(path: Path) -> None:
    """Keep the first half of the file (a copy or a write cut short)."""
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


DAMAGES = ("flipped-bit", "rng-state", "stale-round", "truncated")


def damage(kind: str, run_dir: Path, node: int, round_: int, older: int) -> str:
    """Do damage `kind` to node `node`'s checkpoint of round `round_` (`older`: an earlier
    round it holds intact); a fragment of the reason `--resume` must refuse the file for."""
    path = checkpoint_path(run_dir, node, round_)
    if kind == "flipped-bit":
        flip_bit(path)
        return "its bytes do not match its digest"
    if kind == "rng-state":
        change_rng(path)
        return "its bytes do not match its digest"
    if kind == "stale-round":
        shutil.copyfile(checkpoint_path(run_dir, node, older), path)
        return f"it holds round {older}, not round {round_}"
    assert kind == "truncated", kind
    truncate(path)
    return "truncated: "
