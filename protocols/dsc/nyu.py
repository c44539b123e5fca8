"""Optional NYU-v2 loader for users who have the data (paper §V: 795 train / 654 test images,
Seg, Dep, Sn).

Layout: the widely used preprocessed NYU-v2 of MTAN (Liu et al.), one `.npy` per sample:
`ROOT/{train,val}/{image,label,depth,normal}/<k>.npy`, k = 0..n-1, with
- image (H, W, 3) float in [0, 1];
- label (H, W) class ids (13 classes), -1 for unlabelled pixels (mapped to `IGNORE`);
- depth (H, W, 1) or (H, W), 0 where the sensor gave no depth;
- normal (H, W, 3) unit normals, zero where unknown.
Files are read with `allow_pickle=False` (plain arrays only, never objects). Nothing is
downloaded; when a file is absent the loader raises `NyuError` with one line naming it.

The DSC family reads it as `--dataset nyuv2 --data-root ROOT` (protocols/dsc/workload.py): each
node loads the pool and keeps its Dirichlet share (`NyuOptions`, the `nyuv2:` section, in
dataset_options.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dfl_config.errors import DflMeshError
from protocols.dsc.taskdata import IGNORE, TaskSet

SPLITS = {"train": "train", "test": "val"}
FOLDERS = {"image": "image", "seg": "label", "dep": "depth", "sn": "normal"}
NYU_CLASSES = 13
LAYOUT = "ROOT/{train,val}/{image,label,depth,normal}/<k>.npy"


class NyuError(ValueError, DflMeshError):
    pass


def count_images(root: str | Path, split: str) -> int:
    """How many samples the split holds (its `image` files), without reading them; NyuError
    (one line) when there are none, so that a launcher can refuse before any node starts."""
    if split not in SPLITS:
        raise NyuError(f"NYU-v2 split {split!r} unknown (known: {', '.join(SPLITS)})")
    base = Path(root) / SPLITS[split]
    count = len(list((base / "image").glob("*.npy")))
    if count == 0:
        raise NyuError(f"NYU-v2 not found: no {base / 'image' / '0.npy'} (expected {LAYOUT})")
    return count


def load_nyu(root: str | Path, split: str,
             tasks: tuple[str, ...] = ("seg", "sn", "dep")) -> TaskSet:
    """The `train` (795) or `test` (654, the `val` folder) split with the labels of `tasks`."""
    if split not in SPLITS:
        raise NyuError(f"NYU-v2 split {split!r} unknown (known: {', '.join(SPLITS)})")
    unknown = [t for t in tasks if t not in FOLDERS]
    if unknown:
        raise NyuError(f"NYU-v2 has no labels for {unknown} (it has seg, sn, dep)")
    base = Path(root) / SPLITS[split]
    count = count_images(root, split)
    columns = {key: np.stack([read(base / FOLDERS[key] / f"{k}.npy") for k in range(count)])
               for key in ("image", *tasks)}
    size = columns["image"].shape[1:3]
    for key, arr in columns.items():
        if arr.shape[1:3] != size:
            raise NyuError(f"NYU-v2 {base / FOLDERS[key]}: images are {size}, these "
                           f"{arr.shape[1:3]}")
    return TaskSet(to_channels_first(columns.pop("image")),
                   {t: convert(t, columns[t]) for t in tasks}, seg_classes=NYU_CLASSES)


def read(path: Path) -> np.ndarray:
    if not path.is_file():
        raise NyuError(f"NYU-v2 file missing: {path} (expected {LAYOUT})")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise NyuError(f"NYU-v2 file unreadable: {path}: {exc}") from None


def to_channels_first(arr: np.ndarray) -> np.ndarray:
    """(N, H, W[, C]) -> (N, C, H, W) float32."""
    if arr.ndim == 3:
        arr = arr[..., None]
    return np.ascontiguousarray(arr.transpose(0, 3, 1, 2), dtype=np.float32)


def convert(task: str, arr: np.ndarray) -> np.ndarray:
    if task == "seg":
        labels = np.rint(arr.reshape(arr.shape[:3])).astype(np.int64)
        labels[labels < 0] = IGNORE
        return labels
    return to_channels_first(arr)
