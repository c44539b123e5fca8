"""Checkpoint and final-model files: tensors plus JSON, pickle-free, sealed, written atomically.

A checkpoint is one safetensors file (where: checkpoint_layout.py): the tensors (model,
optimizer buffers, copies, torch generator states) as tensors, everything else (numpy
generator states, ledgers, the virtual clock, counters) as one JSON document in the file's
metadata. A final model is the model's tensors alone. Both carry the digest of their contents
and are written to a temporary name beside them, fsync'ed and renamed into place
(sealed_file.py), so a file exists whole, with its digest, or not at all; reading one checks
it first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy.ctypeslib  # noqa: F401  imported eagerly: see write_tensors
import torch
from safetensors.torch import load, save

from dfl_node.state import sealed_file
from dfl_node.state.checkpoint_layout import META_KEY
from dfl_node.state.sealed_file import CorruptFile


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


def write(path: Path, state: State) -> str:
    """Write `state` to `path` atomically, sealed; its digest."""
    return write_tensors(path, state.tensors, {META_KEY: json.dumps(state.meta, sort_keys=True)})


def write_tensors(path: Path, tensors: dict[str, torch.Tensor],
                  metadata: dict[str, str] | None = None) -> str:
    """Tensors as a sealed safetensors file, a format any peer tool reads; its digest.

    safetensors reaches `np.ctypeslib` lazily, and numpy's lazy submodule import is not
    thread-safe: in-process nodes saving at the same moment could recurse in it, so this
    module imports it once at load time."""
    body = save({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, metadata=metadata)
    return sealed_file.write(path, body)


def read(path: Path, digest: str | None = None) -> State:
    """The state in `path`, checked against its own digest and, where given, against `digest`
    (the one `--resume` recorded when it checked the file); CorruptFile if either fails."""
    data, sealed = sealed_file.read(path)
    if digest is not None and sealed.digest != digest:
        raise CorruptFile(path, "not the file --resume checked (its digest changed since)")
    return State(load(data), json.loads(sealed.metadata[META_KEY]))
