"""Checkpoint digest: what sealing a checkpoint with its SHA-256 costs a node and `--resume`.

`python -m bench.checkpoint_digest [--full]` writes a checkpoint of a 2.1M-parameter MLP
(784-2048-256-10, 2,134,794 float32 parameters, with a numpy and a torch generator in it, as a
node's state holds them) the way a node does (dfl_node/state/checkpoint_file.py: serialize,
seal, temporary file, fsync, rename, fsync of the directory), and in turn the way it did before
files were sealed (the same without the digest). Not part of the suite: it measures one
function, in seconds.

Figures: the sealed write over the unsealed one (both interleaved, medians); the digest alone
(hashing the serialized bytes: the CPU the seal adds, fsync's disk noise aside); and the check
a reader or `--resume` does (read and verify) over reading the bytes alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save
from torch import nn

from bench.figures import Figure, compare, interleaved, median, module_main
from dfl_node.state import checkpoint_codec, checkpoint_file, sealed_file
from dfl_node.state.checkpoint_layout import META_KEY

LAYERS = (784, 2048, 256, 10)  # 2,134,794 parameters
QUICK_REPS, FULL_REPS = 15, 60


def node_state() -> checkpoint_file.State:
    """A node's checkpoint of the MLP: its parameters and its random streams."""
    torch.manual_seed(0)
    model = nn.Sequential(*(nn.Linear(a, b) for a, b in pairwise(LAYERS)))
    state = checkpoint_file.State()
    state.put("model", checkpoint_codec.capture(model))
    state.put("rng", checkpoint_codec.capture(np.random.default_rng(0)))
    state.put("gen", checkpoint_codec.capture(torch.Generator().manual_seed(0)))
    return state


def unsealed_write(path: Path, state: checkpoint_file.State) -> None:
    """The writer before digests: serialize, temporary file, fsync, rename, fsync the directory."""
    tensors = {k: v.detach().cpu().contiguous() for k, v in state.tensors.items()}
    body = save(tensors, metadata={META_KEY: json.dumps(state.meta, sort_keys=True)})
    tmp = path.with_name(f".{path.name}.tmp")
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


def timed(action: Callable[[], object]) -> Callable[[], float]:
    def run() -> float:
        began = time.perf_counter()
        action()
        return (time.perf_counter() - began) * 1000
    return run


def figures(quick: bool) -> list[Figure]:
    reps = QUICK_REPS if quick else FULL_REPS
    state = node_state()
    params = sum(t.numel() for k, t in state.tensors.items() if k.startswith("model/"))
    with tempfile.TemporaryDirectory(prefix="dfl-bench-digest-") as tmp:
        sealed, plain = Path(tmp) / "sealed.safetensors", Path(tmp) / "plain.safetensors"
        writes = interleaved({"sealed": timed(lambda: checkpoint_file.write(sealed, state)),
                              "unsealed": timed(lambda: unsealed_write(plain, state))}, reps)
        body = plain.read_bytes()
        reads = interleaved({"verify": timed(lambda: sealed_file.verify(sealed)),
                             "read": timed(sealed.read_bytes),
                             "digest": timed(lambda: hashlib.sha256(body).digest())}, reps)
        size = sealed.stat().st_size
    name = f"write a {params / 1e6:.1f}M-param checkpoint ({size / 1e6:.1f} MB)"
    note = f"{os.cpu_count()} cores; medians of {reps} interleaved repetitions, ms"
    return [
        compare("digest", f"{name}, sealed", median(writes["sealed"]), "ms",
                "the same write unsealed", median(writes["unsealed"]), reps=reps, note=note),
        compare("digest", f"SHA-256 of its {size / 1e6:.1f} MB alone", median(reads["digest"]),
                "ms", "the unsealed write", median(writes["unsealed"]), reps=reps, note=note),
        compare("digest", "read and verify it", median(reads["verify"]), "ms",
                "reading its bytes alone", median(reads["read"]), reps=reps, note=note),
    ]


if __name__ == "__main__":
    module_main(figures, __doc__, f"{FULL_REPS} repetitions instead of {QUICK_REPS}")
