"""Partitioners: which training samples each node holds, and each node's local test split.

They are pure functions of the labels and the data seed, so every host derives the same shards
from the plan's data section alone. Part `j` belongs to the j-th node in sorted id order. Every
training sample lands in exactly one part.

`--partition` specs (parsed in dfl_node/settings/partition.py):
- `iid`: a seeded permutation cut into near-equal parts.
- `shards:C`: the SSD-FL slot scheme (docs/protocols/ssd-fl.md#e4): device d holds classes
  {(d*C + t) mod K : t < C}, a seeded permutation decides which node is device d, and each
  class's samples are split evenly among the devices holding it (equal part sizes whenever
  parts*C is a multiple of K). `shards:C:ordered`: the same without the permutation, node
  position d is device d.
- `dirichlet:ALPHA[:MIN]`: for each class, shares p ~ Dir(ALPHA * 1) cut that class's
  shuffled samples; the whole draw is repeated until every part has at least MIN samples
  (default 64 = 2 batches of 32, so both DMFL-SQ batches fit in a shard).
"""

from __future__ import annotations

import numpy as np

from dfl_node.learning.seeds import numpy_stream
from dfl_node.settings.partition import (
    DirichletPartition,
    GivenPartition,
    IidPartition,
    ParsedPartition,
    PartitionError,
    ShardsPartition,
)

DIRICHLET_ATTEMPTS = 1000


def class_indices(labels: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """Each class's sample indices, shuffled; class k at position k."""
    classes = int(labels.max()) + 1
    return [rng.permutation(np.flatnonzero(labels == k)) for k in range(classes)]


def gather(pieces: list[list[np.ndarray]]) -> list[np.ndarray]:
    return [np.sort(np.concatenate(p)) for p in pieces]


def iid(labels: np.ndarray, parts: int, seed: int) -> list[np.ndarray]:
    """A seeded permutation cut into `parts` near-equal, sorted index sets."""
    order = numpy_stream(seed, -1, "partition/iid").permutation(len(labels))
    return [np.sort(chunk) for chunk in np.array_split(order, parts)]


def label_shards(labels: np.ndarray, parts: int, per_node: int, seed: int,
                 ordered: bool = False) -> list[np.ndarray]:
    """The SSD-FL slot scheme: `per_node` consecutive classes per device (see module doc)."""
    rng = numpy_stream(seed, -1, "partition/shards")
    by_class = class_indices(labels, rng)
    classes = len(by_class)
    if not 1 <= per_node <= classes:
        raise PartitionError(f"shards:{per_node}: needs 1 to {classes} labels per node")
    if parts * per_node < classes:
        raise PartitionError(f"shards:{per_node} on {parts} nodes covers only "
                             f"{parts * per_node} of {classes} classes")
    device_of = rng.permutation(parts)  # drawn under `ordered` too: the same stream either way
    if ordered:
        device_of = np.arange(parts)
    holders: list[list[int]] = [[] for _ in range(classes)]
    for device in range(parts):
        for t in range(per_node):
            holders[(device * per_node + t) % classes].append(device)
    pieces: list[list[np.ndarray]] = [[] for _ in range(parts)]
    for k, idx in enumerate(by_class):
        for device, chunk in zip(holders[k], np.array_split(idx, len(holders[k])), strict=True):
            pieces[device].append(chunk)
    return gather([pieces[device] for device in device_of])


def dirichlet(labels: np.ndarray, parts: int, alpha: float, min_size: int,
              seed: int) -> list[np.ndarray]:
    """Per-class Dirichlet shares, redrawn until every part holds `min_size` samples."""
    rng = numpy_stream(seed, -1, "partition/dirichlet")
    by_class = class_indices(labels, rng)
    sizes = np.array([len(idx) for idx in by_class])
    for _ in range(DIRICHLET_ATTEMPTS):
        shares = rng.dirichlet(np.full(parts, alpha), size=len(by_class))
        cuts = (np.cumsum(shares, axis=1)[:, :-1] * sizes[:, None]).astype(np.int64)
        counts = np.diff(cuts, axis=1, prepend=0, append=sizes[:, None])
        if counts.sum(axis=0).min() >= min_size:
            pieces: list[list[np.ndarray]] = [[] for _ in range(parts)]
            for idx, row in zip(by_class, cuts, strict=True):
                for part, chunk in enumerate(np.split(idx, row)):
                    pieces[part].append(chunk)
            return gather(pieces)
    raise PartitionError(f"dirichlet:{alpha}: no draw in {DIRICHLET_ATTEMPTS} gave all {parts} "
                         f"nodes at least {min_size} samples; lower the minimum "
                         f"(dirichlet:{alpha}:MIN) or raise alpha")


def partition(spec: ParsedPartition, labels: np.ndarray, parts: int,
              seed: int) -> list[np.ndarray]:
    """The parts of a parsed `--partition` (dfl_node/settings/partition.py)."""
    if not 1 <= parts <= len(labels):
        raise PartitionError(f"cannot split {len(labels)} samples into {parts} parts")
    match spec:
        case IidPartition():
            return iid(labels, parts, seed)
        case ShardsPartition(per_node=per_node, ordered=ordered):
            return label_shards(labels, parts, per_node, seed, ordered)
        case DirichletPartition(alpha=alpha):
            return dirichlet(labels, parts, alpha, spec.minimum, seed)
        case GivenPartition():  # the handed-over split itself: dfl_node/learning/given.py
            raise PartitionError("given: only for arrays handed over one set per node "
                                 "(dfl_mesh.run(dataset={'train': [...]}))")


def split_like(train_parts: list[np.ndarray], train_labels: np.ndarray,
               test_labels: np.ndarray, seed: int) -> list[np.ndarray]:
    """Local test splits: each class's test samples cut in proportion to the parts' train counts.

    A node's test split thus has its training label distribution. For `dirichlet` this is the
    "same p_c" rule of docs/protocols/dmfl-sq.md#a9 up to the rounding of one training sample;
    for `iid` and
    `shards` it is the natural counterpart. Test samples go to at most one node.
    """
    classes = int(max(train_labels.max(), test_labels.max())) + 1
    counts = np.stack([np.bincount(train_labels[p], minlength=classes) for p in train_parts])
    rng = numpy_stream(seed, -1, "partition/test")
    pieces: list[list[np.ndarray]] = [[] for _ in train_parts]
    for k, idx in enumerate(class_indices(test_labels, rng)):
        weights = counts[:, k]
        if weights.sum() == 0:
            continue  # no node trains on class k, so none is tested on it
        cuts = np.cumsum(weights)[:-1] * len(idx) // weights.sum()
        for part, chunk in enumerate(np.split(idx, cuts)):
            pieces[part].append(chunk)
    return gather(pieces)
