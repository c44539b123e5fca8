"""Where a node's accuracy is measured: the `eval_split` a run may choose and the default size
of the global evaluation subset (dfl_node/learning/shards.py says what each split is).

Apart from the shards, which import numpy and the dataset loaders, because the launcher's
config model checks these keys before anything runs (issue 45)."""

from __future__ import annotations

DEFAULT_EVAL_SIZE = 2000
EVAL_SPLITS = ("global", "local", "both")
