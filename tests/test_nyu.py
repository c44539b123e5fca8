"""The optional NYU-v2 loader, on a small generated tree in the MTAN layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from protocols.dsc.nyu import NYU_CLASSES, NyuError, load_nyu
from protocols.dsc.taskdata import IGNORE


def write_split(root: Path, folder: str, count: int, rng: np.random.Generator) -> dict:
    arrays = {"image": rng.uniform(0, 1, (count, 6, 8, 3)),
              "label": rng.integers(-1, NYU_CLASSES, (count, 6, 8)).astype(np.float32),
              "depth": rng.uniform(0, 5, (count, 6, 8, 1)),
              "normal": rng.normal(size=(count, 6, 8, 3))}
    for name, arr in arrays.items():
        (root / folder / name).mkdir(parents=True)
        for k in range(count):
            np.save(root / folder / name / f"{k}.npy", arr[k])
    return arrays


@pytest.fixture
def nyu_root(tmp_path: Path) -> tuple[Path, dict]:
    rng = np.random.default_rng(0)
    train = write_split(tmp_path, "train", 4, rng)
    write_split(tmp_path, "val", 3, rng)
    return tmp_path, train


def test_loads_the_layout_channels_first(nyu_root: tuple[Path, dict]) -> None:
    root, raw = nyu_root
    train = load_nyu(root, "train")
    assert len(train) == 4 and len(load_nyu(root, "test")) == 3
    assert train.tasks == ("seg", "sn", "dep") and train.seg_classes == 13
    np.testing.assert_allclose(train.images, raw["image"].transpose(0, 3, 1, 2), rtol=1e-6)
    np.testing.assert_allclose(train.targets["dep"], raw["depth"].transpose(0, 3, 1, 2),
                               rtol=1e-6)
    np.testing.assert_allclose(train.targets["sn"], raw["normal"].transpose(0, 3, 1, 2),
                               rtol=1e-6)
    seg = train.targets["seg"]
    assert seg.dtype == np.int64 and seg.shape == (4, 6, 8)
    assert np.array_equal(seg == IGNORE, raw["label"] < 0)
    assert np.array_equal(seg[seg != IGNORE], raw["label"][raw["label"] >= 0].astype(np.int64))
    only_dep = load_nyu(root, "train", tasks=("dep",))
    assert only_dep.tasks == ("dep",)


def test_absent_data_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(NyuError) as err:
        load_nyu(tmp_path / "nowhere", "train")
    message = str(err.value)
    assert "\n" not in message and "NYU-v2 not found" in message
    assert str(tmp_path / "nowhere" / "train" / "image" / "0.npy") in message


def test_missing_label_file_is_named(nyu_root: tuple[Path, dict]) -> None:
    root, _ = nyu_root
    (root / "train" / "depth" / "2.npy").unlink()
    with pytest.raises(NyuError, match=r"file missing: .*train/depth/2\.npy"):
        load_nyu(root, "train")
    with pytest.raises(NyuError, match="kp"):
        load_nyu(root, "train", tasks=("kp",))


def test_pickled_objects_are_refused(nyu_root: tuple[Path, dict]) -> None:
    root, _ = nyu_root
    np.save(root / "val" / "label" / "1.npy", np.array([{"x": 1}], dtype=object),
            allow_pickle=True)
    with pytest.raises(NyuError, match="unreadable"):
        load_nyu(root, "test")
