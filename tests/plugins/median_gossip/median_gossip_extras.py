"""A model and a generated dataset from the same plugin package: the other two plugin points a
researcher's package may fill (`dfl_mesh.models`, `dfl_mesh.datasets`)."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from torch import nn

from dfl_config.section import Count, Section
from dfl_node.learning.arrays import DatasetArrays
from dfl_node.learning.generated import GeneratedDataset
from dfl_node.settings.model import ModelConfig


class TinyMlpConfig(ModelConfig):
    name: Literal["tiny-mlp"]
    width: Count = 8
    """Hidden width."""

    def build(self, input_shape: tuple[int, ...], classes: int) -> nn.Module:
        return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), self.width),
                             nn.ReLU(), nn.Linear(self.width, classes))


class RingsOptions(Section):
    samples: Count = 600
    """Points per split."""


class Rings(GeneratedDataset):
    """Two concentric rings in the plane: class 0 inside, class 1 outside."""

    options = RingsOptions

    def generate(self, options: RingsOptions, seed: int) -> DatasetArrays:
        rng = np.random.default_rng(seed)
        n = 2 * options.samples
        y = rng.integers(0, 2, size=n)
        angle = rng.uniform(0, 2 * np.pi, size=n)
        radius = 1.0 + y + rng.normal(0, 0.1, size=n)
        x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
        x, y = x.astype(np.float32), y.astype(np.int64)
        half = options.samples
        return DatasetArrays(x[:half], y[:half], x[half:], y[half:], classes=2)
