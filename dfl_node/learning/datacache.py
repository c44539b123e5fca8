"""The prepared-data cache: where decoded datasets live and how a node opens them.

The launcher decodes a dataset once into plain `.npy` arrays (images uint8 NCHW, labels int64)
in a directory named by the dataset and a content hash of its source files; nodes only
memory-map them, so a hundred processes on one host share one copy in the page cache. This
module is the layout both sides agree on; the writer is `launcher.data.prepare`.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dfl_config.errors import DflMeshError

# The four arrays of every entry, each `<name>.npy`.
ARRAYS = ("x_train", "y_train", "x_test", "y_test")
META = "meta.json"
# Bumped whenever decoding or the layout changes, so an old entry is never reused.
FORMAT = 1


class DataError(ValueError, DflMeshError):
    """Data a node cannot load: a missing cache entry, a bad data section; one line."""


def cache_root() -> Path:
    """`$DFL_MESH_CACHE`, else `$XDG_CACHE_HOME/dfl-mesh`, else `~/.cache/dfl-mesh`."""
    if os.environ.get("DFL_MESH_CACHE"):
        return Path(os.environ["DFL_MESH_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dfl-mesh"


def entry_name(dataset: str, fingerprint: str) -> str:
    return f"{dataset}-{fingerprint[:16]}"


@dataclass(frozen=True)
class Meta:
    """What an entry holds; written last, so an entry with a meta file is complete."""

    dataset: str
    fingerprint: str
    source: str
    classes: int
    shape: tuple[int, ...]
    train_size: int
    test_size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    format: int = FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)


def read_meta(entry: Path) -> Meta | None:
    """The entry's metadata, or None when the entry is absent, partial or of another format."""
    try:
        raw: dict[str, Any] = json.loads((entry / META).read_text())
    except (OSError, ValueError):
        return None
    if raw.get("format") != FORMAT:
        return None
    return Meta(**{**raw, "shape": tuple(raw["shape"]), "mean": tuple(raw["mean"]),
                   "std": tuple(raw["std"])})


def locate_entry(cache_dir: str, fingerprint: str) -> tuple[Path, Meta]:
    """The plan's entry, or the same-named one under this host's cache root (another host)."""
    for entry in (Path(cache_dir), cache_root() / Path(cache_dir).name):
        meta = read_meta(entry)
        if meta is not None and meta.fingerprint == fingerprint:
            return entry, meta
    raise DataError(f"no prepared data {Path(cache_dir).name} (fingerprint {fingerprint[:16]}) "
                     f"at {cache_dir} or under {cache_root()}; run `dfl-launch plan` with the "
                     "same data options on this host to prepare it")


def open_arrays(entry: Path) -> dict[str, np.ndarray]:
    """Read-only memory maps of the entry's arrays (the .npy header is parsed, never unpickled)."""
    return {name: np.lib.format.open_memmap(entry / f"{name}.npy", mode="r") for name in ARRAYS}


def release_mapped_pages(arrays: Iterable[np.ndarray]) -> None:
    """Unmap from this process the cache pages it has read through `arrays`' memory maps (the
    page cache keeps them; a later read maps them again).

    Reading a node's rows touches pages across the whole file (IID rows are scattered, and the
    kernel maps the pages around each one it faults in), so a node that has copied its shard out
    still mapped nearly all 47 MB of Fashion-MNIST's training images. Pages mapped by k
    processes count 1/k in each one's PSS: 2.3 MB per node of a 20-node mesh, for data the node
    no longer reads. Arrays that are not memory maps are left alone."""
    for array in arrays:
        mapping = getattr(array, "_mmap", None)
        if isinstance(mapping, mmap.mmap) and not mapping.closed:
            mapping.madvise(mmap.MADV_DONTNEED)
