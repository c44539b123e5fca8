"""Datasets handed over as arrays (`dfl_mesh.run(dataset=...)`), found by their fingerprint.

A plan whose data section names the dataset `given` holds no path: its `fingerprint` (sha256
of the arrays) finds them in this process's table, which the threads backend's nodes share
with the launcher and the processes backend's nodes inherit from it by fork. A process without
them (`dfl-node` on another host) refuses the plan in one line. Arrays handed over one per
node keep that split: the partition is `given`, and `node_sizes` says which consecutive
training rows each client holds, in sorted id order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from dfl_node.learning.arrays import DatasetArrays
from dfl_node.learning.datacache import DataError

_ARRAYS: dict[str, DatasetArrays] = {}


def fingerprint(arrays: DatasetArrays, node_sizes: Sequence[int] | None) -> str:
    """sha256 over every array's dtype, shape and bytes, and the per-node split."""
    digest = hashlib.sha256(f"dfl-mesh given data\n{arrays.classes}\n{node_sizes}\n".encode())
    for array in (arrays.x_train, arrays.y_train, arrays.x_test, arrays.y_test):
        contiguous = np.ascontiguousarray(array)
        digest.update(f"{contiguous.dtype.str} {contiguous.shape}\n".encode())
        digest.update(contiguous.data)
    return digest.hexdigest()


def give_arrays(arrays: DatasetArrays, node_sizes: Sequence[int] | None) -> str:
    """Put `arrays` in this process's table (and in every process forked from it afterwards);
    their fingerprint, by which a plan names them."""
    key = fingerprint(arrays, node_sizes)
    _ARRAYS[key] = arrays
    return key


def given_arrays(key: str) -> DatasetArrays:
    found = _ARRAYS.get(key)
    if found is None:
        raise DataError(f"dataset given: arrays {key[:12]} were handed over as objects to the "
                        "process that launched the run (dfl_mesh.run(dataset=...)); this "
                        "process has none")
    return found


def given_parts(node_sizes: Sequence[int], parts: int) -> list[np.ndarray]:
    """Each client's training rows when every client was handed arrays of its own."""
    if len(node_sizes) != parts:
        raise DataError(f"dataset given: arrays for {len(node_sizes)} nodes, but the run has "
                        f"{parts} clients")
    ends = np.cumsum(node_sizes)
    return [np.arange(end - size, end) for size, end in zip(node_sizes, ends, strict=True)]
