"""Checkpoint files: one node's full state after a round, pickle-free, written atomically.

A checkpoint is one safetensors file (where: checkpoint_layout.py): the tensors (model,
optimizer buffers, copies, torch generator states) as tensors, everything else (numpy
generator states, ledgers, the virtual clock, counters) as one JSON document in the file's
metadata. One file means one rename, so a checkpoint either exists whole or not at all: it is
written to a temporary name beside it, fsync'ed, renamed into place, and the directory is
fsync'ed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save

from dfl_node.state.checkpoint_layout import META_KEY


@dataclass
class State:
    """Named tensors plus JSON data; nested parts share one namespace through `/` prefixes."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def put(self, name: str, part: State) -> None:
        self.tensors.update({f"{name}/{k}": v for k, v in part.tensors.items()})
        self.meta[name] = part.meta

    def part(self, name: str) -> State:
        prefix = f"{name}/"
        return State({k[len(prefix):]: v for k, v in self.tensors.items() if k.startswith(prefix)},
                     dict(self.meta.get(name, {})))


def write(path: Path, state: State) -> None:
    """Write `state` to `path` atomically: temp file, fsync, rename, fsync of the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous() for k, v in state.tensors.items()}
    body = save(tensors, metadata={META_KEY: json.dumps(state.meta, sort_keys=True)})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as handle:
        handle.write(body)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read(path: Path) -> State:
    with safe_open(str(path), framework="pt") as handle:
        meta = json.loads((handle.metadata() or {})[META_KEY])
        tensors = {k: handle.get_tensor(k) for k in handle.keys()}  # noqa: SIM118
    return State(tensors, meta)
