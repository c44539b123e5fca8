"""The name by which a data section says its arrays were handed over as objects (the dataset
`given`: dfl_node/learning/given.py; its partition's name is dfl_node/settings/partition.py's).
Apart, without numpy, because the launcher writes it into the config of a request it is still
checking (issue 45)."""

from __future__ import annotations

GIVEN_DATASET = "given"
