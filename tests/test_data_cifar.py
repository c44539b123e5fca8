"""CIFAR-10 from an ImageFolder tree or its archive; the full shared archive is a slow test."""

from __future__ import annotations

import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dfl_node.learning.datacache import open_arrays
from launcher.data.cifar10 import CLASSES
from launcher.data.prepare import prepare_data
from launcher.errors import LaunchError

CONFIG = {"dataset": "cifar10", "partition": "iid", "eval_split": "global", "seed": 0,
          "synthetic": {}}
PER_CLASS = {"train": 3, "test": 1}


def write_tree(root: Path) -> dict[str, np.ndarray]:
    """A tiny tree of lossless PNGs; returns the expected NCHW arrays in (label, name) order."""
    rng = np.random.default_rng(0)
    expected: dict[str, list[np.ndarray]] = {"train": [], "test": []}
    for split, count in PER_CLASS.items():
        for name in CLASSES:
            (root / split / name).mkdir(parents=True)
            for i in range(count):
                pixels = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(root / split / name / f"{i:04d}.png")
                expected[split].append(pixels.transpose(2, 0, 1))
    return {split: np.stack(images) for split, images in expected.items()}


def prepare(data_root: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
            parts: int | None = 4) -> dict[str, np.ndarray]:
    monkeypatch.setenv("DFL_MESH_CACHE", str(cache))
    extra = prepare_data({**CONFIG, "data_root": str(data_root)}, parts)
    return {**open_arrays(Path(extra["cache_dir"])), "fingerprint": extra["fingerprint"]}


def test_imagefolder_tree_in_label_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = write_tree(tmp_path / "tree")
    got = prepare(tmp_path / "tree", tmp_path / "cache", monkeypatch)
    np.testing.assert_array_equal(got["x_train"], expected["train"])
    np.testing.assert_array_equal(got["x_test"], expected["test"])
    assert got["y_train"].tolist() == [k for k in range(10) for _ in range(3)]
    assert got["y_test"].tolist() == list(range(10))


def test_archive_gives_the_same_arrays_as_the_tree(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    expected = write_tree(tmp_path / "cifar10-jpeg")
    archive = tmp_path / "data" / "cifar10-jpeg.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted((tmp_path / "cifar10-jpeg").rglob("*"), reverse=True):  # any order
            tar.add(path, arcname=str(path.relative_to(tmp_path)), recursive=False)
    got = prepare(archive, tmp_path / "cache", monkeypatch)
    np.testing.assert_array_equal(got["x_train"], expected["train"])
    np.testing.assert_array_equal(got["x_test"], expected["test"])
    in_dir = prepare(archive.parent, tmp_path / "cache", monkeypatch)  # the directory holding it
    assert in_dir["fingerprint"] == got["fingerprint"]


def pickled_batches(root: Path) -> None:
    (root / "cifar-10-batches-py").mkdir(parents=True)


def empty_dir(root: Path) -> None:
    root.mkdir()


def unknown_class(root: Path) -> None:
    (root / "train" / "kitten").mkdir(parents=True)
    (root / "test").mkdir()
    (root / "train" / "kitten" / "a.png").write_bytes(b"")


@pytest.mark.parametrize(
    ("setup", "message"),
    [(pickled_batches, "pickled"), (empty_dir, "found no train/ and test/"),
     (unknown_class, "'kitten' is not a CIFAR-10 class"), (None, "no --data-root")],
)
def test_unusable_sources_are_one_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              setup: Callable[[Path], None] | None,
                                              message: str) -> None:
    root = tmp_path / "data"
    if setup is not None:
        setup(root)
    monkeypatch.setenv("DFL_MESH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(LaunchError, match=message) as info:
        prepare_data({**CONFIG, "data_root": str(root) if setup else None})
    assert "\n" not in str(info.value)


def test_wrong_image_size_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(tmp_path / "tree")
    Image.new("RGB", (28, 28)).save(tmp_path / "tree" / "test" / "cat" / "0000.png")
    with pytest.raises(LaunchError, match="28x28, not 32x32"):
        prepare(tmp_path / "tree", tmp_path / "cache", monkeypatch)


@pytest.mark.slow
def test_the_shared_archive_gives_50000_and_10000(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  cifar_archive: Path) -> None:
    got = prepare(cifar_archive, tmp_path / "cache", monkeypatch, parts=20)
    assert got["x_train"].shape == (50000, 3, 32, 32)
    assert got["x_test"].shape == (10000, 3, 32, 32)
    assert np.bincount(got["y_train"]).tolist() == [5000] * 10
    assert np.bincount(got["y_test"]).tolist() == [1000] * 10
    # CIFAR-10's well-known per-channel training means (JPEG shifts them by about 1e-4)
    means = got["x_train"].mean(axis=(0, 2, 3)) / 255
    np.testing.assert_allclose(means, [0.4914, 0.4822, 0.4465], atol=1e-3)
