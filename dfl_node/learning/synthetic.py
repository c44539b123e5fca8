"""The `synthetic` dataset: a fixed, seeded Gaussian-blob classification task.

It needs no files, is identical on every host for the same data seed, and a small MLP learns it
to well above chance in a few rounds, which makes it the dataset of the runtime's own tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dfl_node.learning.seeds import numpy_stream


@dataclass(frozen=True)
class SyntheticSpec:
    classes: int = 10
    features: int = 32
    train_size: int = 4000
    test_size: int = 2000
    noise: float = 2.0
    seed: int = 0


def make_synthetic(spec: SyntheticSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test), float32 features and int64 labels."""
    rng = numpy_stream(spec.seed, -1, "synthetic")
    means = rng.normal(0.0, 1.0, size=(spec.classes, spec.features))
    total = spec.train_size + spec.test_size
    labels = rng.integers(0, spec.classes, size=total)
    noise = rng.normal(0.0, spec.noise, size=(total, spec.features))
    x = (means[labels] + noise).astype(np.float32)
    y = labels.astype(np.int64)
    n = spec.train_size
    return x[:n], y[:n], x[n:], y[n:]
