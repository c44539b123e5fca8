"""Datasets a node generates from the run's seed instead of reading files: a plugin point.

A package registers a `GeneratedDataset` subclass under the `dfl_mesh.datasets` entry-point
group (the shipped `synthetic` is registered the same way, in pyproject.toml); `--dataset NAME`
then selects it, its options are the config section of the same name (validated by its
`options` model), and every node makes the same arrays from the run's data seed, so partitions,
evaluation splits and exactness work as for any dataset.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

from dfl_config.plugins import Plugins, discover
from dfl_config.section import Section

if TYPE_CHECKING:  # numpy: the launcher reads only the options of a generated dataset
    from dfl_node.learning.arrays import DatasetArrays

DATASETS_GROUP = "dfl_mesh.datasets"


class GeneratedDataset(ABC):
    options: ClassVar[type[Section]]
    """Its config section's model (the section is named after the dataset)."""

    @abstractmethod
    def generate(self, options: Any, seed: int) -> DatasetArrays:
        """The whole dataset for these options; a pure function of them and `seed`."""

    def arrays(self, section: Mapping[str, Any], seed: int) -> DatasetArrays:
        """The dataset of its options section (a plan's or a config's) and the data seed."""
        return self.generate(self.options.model_validate(section), seed)


@cache
def _plugins() -> Plugins:
    return discover(DATASETS_GROUP)


@cache
def generated_datasets() -> dict[str, GeneratedDataset]:
    out = {}
    for name, cls in list(_plugins().found.items()):
        if not (isinstance(cls, type) and issubclass(cls, GeneratedDataset)):
            _plugins().refuse(name, "is not a GeneratedDataset")
            continue
        out[name] = cls()
    return out


def dataset_plugins() -> Plugins:
    """The datasets group as discovered, objects of the wrong kind refused."""
    generated_datasets()
    return _plugins()


def dataset_clash(name: str) -> str | None:
    """One line if `name` is registered by two packages or failed to load, else None."""
    generated_datasets()  # a registered object of the wrong kind is refused there
    return _plugins().why_not(name, "dataset") if _plugins().unavailable(name) else None
