"""A whole dataset as a node sees it: raw arrays, and how selected rows become model inputs.

Real datasets stay memory-mapped uint8 images; only the rows a node selects are copied, so a
node's memory grows with its shard, not with the dataset. A training shard stays uint8 and is
normalised to float32 batch by batch as it is read (`ImageRows`): a float32 copy would be four
times the size (9.4 MB of a 20-node Fashion-MNIST node's 44 MB PSS), and normalising is
elementwise, so a batch comes out bit for bit as it would from a normalised copy. Evaluation
splits are normalised once: they are read whole every evaluation, and the global one is shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np


@dataclass(frozen=True)
class DatasetArrays:
    """Train and test arrays; `mean`/`std` (per channel, on [0, 1] pixels) mark raw uint8 images."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int
    mean: np.ndarray | None = None
    std: np.ndarray | None = None
    from_cache: bool = False  # the arrays are read-only maps of the data cache's files

    def cache_maps(self) -> tuple[np.ndarray, ...]:
        """The four arrays where they are read-only maps of the data cache (`from_cache`), else
        none: arrays handed over or generated are the caller's, whatever they are."""
        return (self.x_train, self.y_train, self.x_test, self.y_test) if self.from_cache else ()

    def train(self, idx: np.ndarray) -> tuple[Samples, np.ndarray]:
        labels = np.asarray(self.y_train[idx], dtype=np.int64)
        if self.mean is None or self.std is None:
            return self.inputs(self.x_train, idx), labels
        return ImageRows(np.asarray(self.x_train[idx]), self.mean, self.std), labels

    def test(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.inputs(self.x_test, idx), np.asarray(self.y_test[idx], dtype=np.int64)

    def inputs(self, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """float32 rows `idx` of `x`: (pixel / 255 - mean) / std per channel for images."""
        if self.mean is None or self.std is None:
            return np.asarray(x[idx], dtype=np.float32)
        return normalised(x[idx], self.mean, self.std, x.ndim)


def normalised(pixels: np.ndarray, mean: np.ndarray, std: np.ndarray, ndim: int) -> np.ndarray:
    """float32 (pixel / 255 - mean) / std per channel, the channel being axis 1 of the
    `ndim`-dimensional dataset array (`pixels` may be one row of it)."""
    rows = np.asarray(pixels, dtype=np.float32)
    per_channel = (-1,) + (1,) * (ndim - 2)
    rows /= np.float32(255)
    rows -= mean.reshape(per_channel)
    rows /= std.reshape(per_channel)
    return rows


@dataclass(frozen=True)
class ImageRows:
    """uint8 images that read as normalised float32: `rows[idx]` is what `normalised` makes of
    those images, `np.asarray(rows)` all of them."""

    pixels: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    dtype: ClassVar[np.dtype] = np.dtype(np.float32)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.pixels.shape)

    def __len__(self) -> int:
        return len(self.pixels)

    def __getitem__(self, idx: Any) -> np.ndarray:
        return normalised(self.pixels[idx], self.mean, self.std, self.pixels.ndim)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        rows = self[:]
        return rows if dtype is None else rows.astype(dtype)


Samples = np.ndarray | ImageRows
"""A node's inputs: a float32 array, or images normalised as they are read."""
