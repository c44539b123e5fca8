"""A whole dataset as a node sees it: raw arrays, and how selected rows become model inputs.

Real datasets stay memory-mapped uint8 images; only the rows a node selects (its shard, its
evaluation split) are copied and normalised to float32, so a node's memory grows with its shard,
not with the dataset.
"""

from __future__ import annotations

from dataclasses import dataclass

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

    def train(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.inputs(self.x_train, idx), np.asarray(self.y_train[idx], dtype=np.int64)

    def test(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.inputs(self.x_test, idx), np.asarray(self.y_test[idx], dtype=np.int64)

    def inputs(self, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """float32 rows `idx` of `x`: (pixel / 255 - mean) / std per channel for images."""
        rows = np.asarray(x[idx], dtype=np.float32)
        if self.mean is None or self.std is None:
            return rows
        per_channel = (-1,) + (1,) * (rows.ndim - 2)
        rows /= np.float32(255)
        rows -= self.mean.reshape(per_channel)
        rows /= self.std.reshape(per_channel)
        return rows
