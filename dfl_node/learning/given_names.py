"""The names by which a data section says its arrays were handed over as objects (the dataset
and the partition `given`: dfl_node/learning/given.py). Apart, without numpy, because the
launcher writes them into the config of a request it is still checking (issue 45)."""

from __future__ import annotations

GIVEN_DATASET = "given"
GIVEN_PARTITION = "given"
