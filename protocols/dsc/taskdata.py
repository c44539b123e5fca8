"""Dense multi-task samples as a node holds them: images plus one label map per task.

The procedural scenes (`protocols.dsc.scenes`) and the optional NYU-v2 loader
(`protocols.dsc.nyu`) both produce a `TaskSet`, so the routed multi-task model, its training loop
and the task metrics see one format whatever the source. Shapes (the decoders' output channels):
`image` (N, 3, H, W) float32; `seg` (N, H, W) int64 with `IGNORE` for unlabelled pixels;
`sn` (N, 3, H, W) unit normals; `dep` (N, 1, H, W) with 0 for invalid pixels; `kp` and `edge`
(N, 1, H, W) in [0, 1].
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from protocols.sdk import numpy_stream

if TYPE_CHECKING:  # numpy where data is drawn: DSC's settings name the tasks, and need none
    import numpy as np

Task = Literal["seg", "sn", "dep", "kp", "edge"]
TASKS: tuple[str, ...] = get_args(Task)
IGNORE = 255
SIZE_ATTEMPTS = 1000


def output_channels(task: str, seg_classes: int) -> int:
    """Decoder output channels per task: Seg = #classes, Sn = 3, Dep = KP = Edge = 1."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r} (known: {', '.join(TASKS)})")
    return {"seg": seg_classes, "sn": 3}.get(task, 1)


@dataclass(frozen=True)
class TaskSet:
    """Images and their per-task label maps; `targets` holds only the tasks this set carries."""

    images: np.ndarray
    targets: dict[str, np.ndarray]
    seg_classes: int

    def __post_init__(self) -> None:
        for task, target in self.targets.items():
            if task not in TASKS:
                raise ValueError(f"unknown task {task!r} (known: {', '.join(TASKS)})")
            if len(target) != len(self.images):
                raise ValueError(f"task {task!r}: {len(target)} labels for "
                                 f"{len(self.images)} images")

    def __len__(self) -> int:
        return len(self.images)

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(t for t in TASKS if t in self.targets)

    def select(self, idx: np.ndarray, tasks: Iterable[str] | None = None) -> TaskSet:
        """Rows `idx`, keeping only `tasks` (all by default): a node sees only its tasks' labels."""
        keep = self.tasks if tasks is None else tuple(tasks)
        missing = [t for t in keep if t not in self.targets]
        if missing:
            raise ValueError(f"this data carries no labels for {missing}")
        return TaskSet(self.images[idx], {t: self.targets[t][idx] for t in keep},
                       self.seg_classes)


def dirichlet_sizes(total: int, parts: int, alpha: float, min_size: int, seed: int) -> np.ndarray:
    """Quantity skew (docs/protocols/dsc.md#a8): Dirichlet(alpha) shares of `total` samples,
    redrawn until every part holds `min_size`; the same on every node for a seed."""
    if parts * min_size > total:
        raise ValueError(f"{parts} nodes x {min_size} samples exceed the pool of {total}")
    import numpy as np

    rng = numpy_stream(seed, -1, "taskdata/sizes")
    for _ in range(SIZE_ATTEMPTS):
        cuts = (np.cumsum(rng.dirichlet(np.full(parts, alpha)))[:-1] * total).astype(np.int64)
        sizes = np.diff(cuts, prepend=0, append=total)
        if sizes.min() >= min_size:
            return sizes
    raise ValueError(f"no Dirichlet({alpha}) draw gave all {parts} nodes {min_size} samples; "
                     "lower the minimum or raise alpha")


def node_share(pool: TaskSet, node_ids: list[int], node: int, tasks: Iterable[str],
               alpha: float = 1.0, min_size: int = 30, seed: int = 0) -> TaskSet:
    """Node `node`'s disjoint Dirichlet-sized share of a fixed pool (NYU-v2's 795 training
    images, docs/protocols/dsc.md#a8), with only the labels of its tasks."""
    import numpy as np

    sizes = dirichlet_sizes(len(pool), len(node_ids), alpha, min_size, seed)
    order = numpy_stream(seed, -1, "taskdata/order").permutation(len(pool))
    pos = node_ids.index(node)
    start = int(sizes[:pos].sum())
    return pool.select(np.sort(order[start : start + sizes[pos]]), tasks)
