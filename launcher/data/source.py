"""What a dataset locator hands the cache: the files to fingerprint and how to decode them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Decoded:
    """A decoded dataset: images uint8 (N, C, H, W), labels int64, in the dataset's own order."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


@dataclass(frozen=True)
class Source:
    """Where a dataset was found.

    `files` (path, name) are hashed into the cache key, content and name, so any change to the
    source makes a new entry; `decode` runs only on a cache miss.
    """

    dataset: str
    description: str
    files: tuple[tuple[Path, str], ...]
    decode: Callable[[], Decoded]
    classes: int = 10
