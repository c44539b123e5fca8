"""The plan's `data` section: what every node derives its shard and evaluation split from
(dfl_node/learning/shards.py), written by the launcher (launcher/config/planner.py).

A typed core the runtime reads (the dataset, its partition and evaluation split, the keys data
preparation adds) and, riding along as extras, each dataset's options section by the dataset's
name: the generated datasets' (`synthetic`) and the ones protocols bring (`scenes`, `nyuv2`).
A dataset's own model reads its section (`options`), so the runtime needs no protocol's model.
Every plan carries every such section, empty where its protocol has none, so plans of all
protocols look alike. The writer sets every core key but `cache_dir`, `fingerprint` and
`node_sizes`, which only a prepared (on-disk) or handed-over dataset has; those are None when
unset, and no other key has a default here, so none is repeated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import ConfigDict, model_validator

from dfl_config.section import Count, Integer, NonNegativeInt, Section
from dfl_node.settings.partition import Partition

EvalSplit = Literal["global", "local", "both"]
"""Which test samples a node evaluates on (dfl_node/learning/shards.py says why each)."""
EVAL_SPLITS: tuple[str, ...] = get_args(EvalSplit)
DEFAULT_EVAL_SIZE = 2000
"""Test samples in the global evaluation subset unless `eval_size` says otherwise."""


class DataSection(Section):
    model_config = ConfigDict(extra="allow")

    dataset: str
    """The dataset's name: generated, brought by a protocol, or on disk (fmnist, cifar10)."""
    data_root: str | None
    """Where the user said the dataset's files are (host-local: in no section hash)."""
    partition: Partition
    eval_split: EvalSplit
    seed: Integer
    """The data seed: the dataset's generation, the partition and the evaluation subset."""
    eval_size: Count
    """Samples of the global evaluation subset (all of the test set if it has fewer)."""
    num_classes: Count
    shape: tuple[Count, ...]
    """One sample's shape."""
    cache_dir: str | None = None
    """This host's prepared cache entry (host-local); None: each node makes the dataset."""
    fingerprint: str | None = None
    """sha256 of the dataset's source files, which proves a host's entry is the plan's; of a
    dataset handed over as arrays (`given`), theirs, which finds them in a node."""
    node_sizes: tuple[NonNegativeInt, ...] | None = None
    """Each client's training rows, in sorted id order, when every client was handed arrays of
    its own (partition `given`); None: the partition splits one training set."""

    @model_validator(mode="after")
    def _options_are_sections(self) -> DataSection:
        for name, value in (self.model_extra or {}).items():
            if not isinstance(value, Mapping):
                raise ValueError(f"{name}: a dataset's options section must be a mapping, "
                                 f"got {value!r}")
        return self

    def options(self, dataset: str | None = None) -> Mapping[str, Any]:
        """The options section of `dataset` (default: the plan's), for its own model to
        validate; {} when the plan holds none."""
        return (self.model_extra or {}).get(dataset or self.dataset) or {}

    def prepared_entry(self) -> tuple[str, str] | None:
        """(cache_dir, fingerprint) of a prepared dataset; None for one each node makes (or
        a section that lacks either)."""
        if self.cache_dir is None or self.fingerprint is None:
            return None
        return self.cache_dir, self.fingerprint
