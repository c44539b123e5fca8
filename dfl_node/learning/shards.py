"""A node's own data: its training shard and its evaluation split.

Evaluation splits (`eval_split`):
- `global`: one seeded subset of the global test set, `eval_size` samples (default 2000), the
  same for every node, so accuracies are comparable across nodes and protocols. 2000 keeps the
  standard error of an accuracy near 1 % while evaluating 20 CNNs every round stays cheap on CPU.
- `local`: the node's own test split (`partition.split_like`): the test set cut per class in
  proportion to the nodes' training counts, so it follows the node's label distribution.
- `both`: `local` for `accuracy` and `loss`, and `global` as well for `global_accuracy` and
  `global_loss`: a paper that does not say which split it used (DMFL-SQ) is then compared both
  ways from one run, with the same models.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from dfl_node.learning.arrays import DatasetArrays, Samples
from dfl_node.learning.datacache import DataError, release_mapped_pages
from dfl_node.learning.datasets import load_arrays
from dfl_node.learning.given import given_parts
from dfl_node.learning.partition import partition, split_like
from dfl_node.learning.seeds import numpy_stream
from dfl_node.settings.data_section import DataSection
from dfl_node.settings.partition import GivenPartition


@dataclass(frozen=True)
class NodeData:
    x_train: Samples
    y_train: np.ndarray
    x_eval: np.ndarray
    y_eval: np.ndarray
    classes: int
    global_eval: tuple[np.ndarray, np.ndarray] | None = None
    """The global subset too, under `eval_split: both` (else None)."""

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


def global_subset(test_size: int, eval_size: int, seed: int) -> np.ndarray:
    """Sorted seeded choice of `eval_size` test indices (all of them if there are fewer)."""
    if eval_size >= test_size:
        return np.arange(test_size)
    return np.sort(numpy_stream(seed, -1, "eval/global").choice(test_size, eval_size,
                                                                 replace=False))


def split_indices(data: DataSection, y_train: np.ndarray,
                  y_test: np.ndarray, parts: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(train indices, eval indices) per node position; the launcher runs it to validate."""
    if isinstance(data.partition, GivenPartition) and data.node_sizes is not None:
        train = given_parts(data.node_sizes, parts)
    else:
        train = partition(data.partition, y_train, parts, data.seed)
    if data.eval_split == "global":
        return train, [global_split(data, y_test)] * parts
    local = split_like(train, y_train, y_test, data.seed)
    empty = [pos for pos, idx in enumerate(local) if len(idx) == 0]
    if empty:
        raise DataError(f"eval_split local: node positions {empty} get no test samples; "
                        "use eval_split global or a larger dirichlet minimum")
    return train, local


def global_split(data: DataSection, y_test: np.ndarray) -> np.ndarray:
    """The global subset's test indices for this data section."""
    return global_subset(len(y_test), data.eval_size, data.seed)


@dataclass(frozen=True)
class PlanData:
    """What every node of a plan derives alike from its data section: the dataset, each node
    position's training and evaluation indices and, for the `global` split, the evaluation
    inputs themselves (the same for every node; shared, so never written to)."""

    arrays: DatasetArrays
    train: list[np.ndarray]
    evals: list[np.ndarray]
    global_eval: tuple[np.ndarray, np.ndarray] | None


KEPT_PLANS = 2  # data sections remembered per process (a process runs one plan at a time)
_plans: OrderedDict[str, PlanData] = OrderedDict()
_plans_lock = threading.Lock()


def plan_data(data: DataSection, parts: int) -> PlanData:
    """The plan's PlanData for `parts` clients, computed once per process: the in-process
    backend's node threads share it, and the processes backend's zygote computes it before it
    forks the nodes (launcher/backends/preload.py), so that no node repeats the partition or
    holds its own copy of the global evaluation split."""
    key = f"{parts}|{json.dumps(data.model_dump(mode='json'), sort_keys=True)}"
    with _plans_lock:
        found = _plans.get(key)
        if found is None:
            arrays = load_arrays(data)
            train, evals = split_indices(data, arrays.y_train, arrays.y_test, parts)
            shared = arrays.test(global_split(data, arrays.y_test)) \
                if data.eval_split in ("global", "both") else None
            found = _plans[key] = PlanData(arrays, train, evals, shared)
            release_mapped_pages(arrays.cache_maps())
            while len(_plans) > KEPT_PLANS:
                _plans.popitem(last=False)
        _plans.move_to_end(key)
    return found


def load_node_data(data: DataSection, clients: list[int], node_id: int) -> NodeData:
    """Node `node_id`'s shard (images read as normalised float32: arrays.ImageRows) and
    evaluation split (normalised float32), from the plan.

    A node that is not a client (an aggregator) gets empty splits of the right shape: it builds
    the same model but never trains or evaluates on data of its own."""
    if node_id not in clients:
        arrays = load_arrays(data)
        none = np.empty(0, dtype=np.int64)
        return NodeData(*arrays.train(none), *arrays.test(none), arrays.classes)
    shared = plan_data(data, len(clients))
    pos = clients.index(node_id)
    both = data.eval_split == "both"
    x_eval, y_eval = shared.global_eval if shared.global_eval is not None and not both \
        else shared.arrays.test(shared.evals[pos])
    node = NodeData(*shared.arrays.train(shared.train[pos]), x_eval, y_eval,
                    shared.arrays.classes, shared.global_eval if both else None)
    release_mapped_pages(shared.arrays.cache_maps())  # the node holds copies of its rows
    return node
