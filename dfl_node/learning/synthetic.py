"""The `synthetic` dataset: a fixed, seeded Gaussian-blob classification task.

It needs no files, is identical on every host for the same data seed, and a small MLP learns it
to well above chance in a few rounds, which makes it the dataset of the runtime's own tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfl_node.learning.generated import GeneratedDataset
from dfl_node.settings.data import SyntheticSettings

if TYPE_CHECKING:  # a node's side: the launcher, which loads this plugin, reads its options
    import numpy as np

    from dfl_node.learning.arrays import DatasetArrays

_DEFAULT = SyntheticSettings()


@dataclass(frozen=True)
class SyntheticTask:
    """What the generator needs: the `synthetic:` section's keys, whose defaults and checks are
    SyntheticSettings's (these fields take them over rather than repeat them), and the data
    seed. A plain dataclass so that an unknown key is a TypeError where it is built."""

    classes: int = _DEFAULT.classes
    features: int = _DEFAULT.features
    train_size: int = _DEFAULT.train_size
    test_size: int = _DEFAULT.test_size
    noise: float = _DEFAULT.noise
    seed: int = 0


def make_synthetic(spec: SyntheticTask) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test), float32 features and int64 labels."""
    import numpy as np

    from dfl_node.learning.seeds import numpy_stream

    rng = numpy_stream(spec.seed, -1, "synthetic")
    means = rng.normal(0.0, 1.0, size=(spec.classes, spec.features))
    total = spec.train_size + spec.test_size
    labels = rng.integers(0, spec.classes, size=total)
    noise = rng.normal(0.0, spec.noise, size=(total, spec.features))
    x = (means[labels] + noise).astype(np.float32)
    y = labels.astype(np.int64)
    n = spec.train_size
    return x[:n], y[:n], x[n:], y[n:]


class SyntheticDataset(GeneratedDataset):
    """`--dataset synthetic`: Gaussian blobs, one per class (the `synthetic:` section)."""

    options = SyntheticSettings

    def generate(self, options: SyntheticSettings, seed: int) -> DatasetArrays:
        from dfl_node.learning.arrays import DatasetArrays

        spec = SyntheticTask(**options.model_dump(), seed=seed)
        return DatasetArrays(*make_synthetic(spec), classes=spec.classes)
