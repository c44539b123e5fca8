"""Fashion-MNIST from Debian's dataset-fashion-mnist files, through the cache, to node shards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dfl_node.learning.arrays import ImageRows
from dfl_node.learning.datacache import DataError, open_arrays
from dfl_node.learning.datasets import load_arrays
from dfl_node.learning.shards import global_subset, load_node_data, plan_data
from dfl_node.settings.data_section import DataSection
from launcher.data import fashion_mnist as data_fmnist
from launcher.data.prepare import plan_section, prepare_data
from launcher.errors import LaunchError

ROOT = Path(__file__).resolve().parents[1]
CONFIG = {"dataset": "fmnist", "data_root": None, "partition": "iid", "eval_split": "global",
          "seed": 0, "synthetic": {}}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def prepared(cache: Path) -> DataSection:
    """The plan's data section for FMNIST, prepared once into a fresh cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DFL_MESH_CACHE", str(cache))
        return plan_section({**CONFIG, **prepare_data(CONFIG, 20)})


def test_debian_files_give_the_full_dataset(prepared: DataSection) -> None:
    arrays = open_arrays(Path(str(prepared.cache_dir)))
    assert arrays["x_train"].shape == (60000, 1, 28, 28)
    assert arrays["x_test"].shape == (10000, 1, 28, 28)
    assert arrays["x_train"].dtype == np.uint8 and arrays["y_train"].dtype == np.int64
    assert np.bincount(arrays["y_train"]).tolist() == [6000] * 10
    assert np.bincount(arrays["y_test"]).tolist() == [1000] * 10
    assert prepared.num_classes == 10 and prepared.shape == (1, 28, 28)
    assert prepared.eval_size == 2000 and len(str(prepared.fingerprint)) == 64


def test_normalisation_uses_the_training_set_statistics(prepared: DataSection) -> None:
    arrays = load_arrays(prepared)
    assert isinstance(arrays.x_train, np.memmap)
    assert arrays.mean is not None and arrays.std is not None
    np.testing.assert_allclose(arrays.mean, [0.2860], atol=1e-4)
    np.testing.assert_allclose(arrays.std, [0.3530], atol=1e-4)


def test_second_prepare_hits_the_cache(prepared: DataSection, cache: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    x_train = Path(str(prepared.cache_dir)) / "x_train.npy"
    before = x_train.stat()

    def no_decode(files: object) -> None:
        raise AssertionError("decoded again")

    monkeypatch.setenv("DFL_MESH_CACHE", str(cache))
    monkeypatch.setattr(data_fmnist, "decode", no_decode)
    again = plan_section({**CONFIG, **prepare_data(CONFIG, 20)})
    assert again == prepared
    after = x_train.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_same_files_elsewhere_hit_the_same_entry(prepared: DataSection, cache: Path,
                                                 tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    raw = tmp_path / "FashionMNIST" / "raw"  # torchvision's layout under --data-root
    raw.mkdir(parents=True)
    for path in data_fmnist.DEBIAN_DIR.glob("*-ubyte.gz"):
        (raw / path.name).symlink_to(path)
    monkeypatch.setenv("DFL_MESH_CACHE", str(cache))
    monkeypatch.setattr(data_fmnist, "decode", None)
    extra = prepare_data({**CONFIG, "data_root": str(tmp_path)})
    assert extra["fingerprint"] == prepared.fingerprint


CONCURRENT = """
import json, os, sys
from launcher.data import prepare as dataprep
build = dataprep.build_entry
def counted(*args):
    open(os.path.join(sys.argv[1], f"decoded-{os.getpid()}"), "w").close()
    return build(*args)
dataprep.build_entry = counted
print("ready", flush=True)
sys.stdin.readline()  # both start preparing at once, when the test says "go"
config = {"dataset": "fmnist", "data_root": None, "partition": "shards:2", "eval_split": "local",
          "seed": 1, "synthetic": {}}
print(json.dumps(dataprep.prepare_data(config, 20)))
"""


def test_two_concurrent_prepares_both_succeed_with_one_decode(tmp_path: Path) -> None:
    env = {**os.environ, "DFL_MESH_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT, str(tmp_path)], env=env,
                              cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:  # both have imported numpy and torch
        assert p.stdout is not None and p.stdout.readline() == "ready\n", p.stderr
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    first, second = (json.loads(out) for out, _ in outs)
    assert first == second
    assert len(list(tmp_path.glob("decoded-*"))) == 1
    entries = sorted(p.name for p in (tmp_path / "cache").iterdir() if p.is_dir())
    assert entries == [Path(first["cache_dir"]).name]  # no temporary directory left behind


def test_nodes_get_normalised_float32_shards(prepared: DataSection) -> None:
    ids = list(range(20))
    nodes = [load_node_data(prepared, ids, i) for i in ids]
    assert sum(len(n.y_train) for n in nodes) == 60000
    node = nodes[3]
    assert node.x_train.dtype == np.float32 and node.y_train.dtype == np.int64
    assert node.x_train.shape == (3000, 1, 28, 28) and node.input_shape == (1, 28, 28)
    # a private copy of the shard only, kept as uint8 pixels and normalised as it is read
    assert isinstance(node.x_train, ImageRows) and not isinstance(node.x_train.pixels, np.memmap)
    assert node.x_train.pixels.dtype == np.uint8
    shard = np.asarray(node.x_train)
    assert shard.dtype == np.float32 and shard.shape == (3000, 1, 28, 28)
    assert abs(float(shard.mean())) < 0.05 and abs(float(shard.std()) - 1) < 0.05
    # a batch read from the pixels is bit for bit the same rows of the whole normalised shard
    batch = np.array([2999, 0, 17, 17])
    assert np.array_equal(node.x_train[batch], shard[batch])
    assert np.array_equal(node.x_train[5], shard[5])
    arrays = load_arrays(prepared)  # and equal to normalising the dataset's rows at once
    assert np.array_equal(shard, arrays.inputs(arrays.x_train, plan_data(prepared, 20).train[3]))
    assert node.x_eval.shape == (2000, 1, 28, 28)
    assert all(np.array_equal(n.y_eval, node.y_eval) for n in nodes)  # one global subset
    subset = global_subset(10000, 2000, prepared.seed)
    raw = open_arrays(Path(str(prepared.cache_dir)))
    np.testing.assert_array_equal(node.y_eval, raw["y_test"][subset])
    pixels = raw["x_test"][subset[:5]].astype(np.float64) / 255
    np.testing.assert_allclose(node.x_eval[:5], (pixels - 0.28604) / 0.35302, atol=1e-3)


def test_a_node_on_another_host_finds_the_entry_under_its_cache_root(
        prepared: DataSection, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DFL_MESH_CACHE", str(cache))
    elsewhere = prepared.model_copy(
        update={"cache_dir": f"/no/such/host/path/{Path(str(prepared.cache_dir)).name}"})
    assert len(load_arrays(elsewhere).y_train) == 60000
    with pytest.raises(DataError, match="no prepared data"):
        load_arrays(prepared.model_copy(update={"fingerprint": "0" * 64}))


def test_missing_dataset_says_where_it_looked_and_how_to_get_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(root: Path) -> None:
        raise OSError("network unreachable")

    monkeypatch.setattr(data_fmnist, "download", offline)
    monkeypatch.setenv("DFL_MESH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(LaunchError) as info:
        prepare_data({**CONFIG, "data_root": str(tmp_path / "data")})
    message = str(info.value)
    assert "\n" not in message
    assert str(tmp_path / "data" / "FashionMNIST" / "raw") in message
    assert "apt-get install dataset-fashion-mnist" in message
    assert "network unreachable" in message


@pytest.mark.parametrize(("name", "content"), [
    ("train-images-idx3-ubyte", b"\x00\x00\x0d\x03garbage"),  # float IDX, not bytes
    ("train-images-idx3-ubyte", b"\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x1c"),  # cut
    ("train-images-idx3-ubyte.gz", b"not gzip at all"),
])
def test_a_broken_idx_file_is_named(tmp_path: Path, name: str, content: bytes) -> None:
    for stem in data_fmnist.STEMS.values():
        (tmp_path / f"{stem}.gz").symlink_to(data_fmnist.DEBIAN_DIR / f"{stem}.gz")
    broken = tmp_path / name
    broken.unlink(missing_ok=True)
    (tmp_path / "train-images-idx3-ubyte.gz").unlink(missing_ok=True)
    broken.write_bytes(content)
    files = data_fmnist.find_files(tmp_path)
    assert files is not None and files["x_train"] == broken
    with pytest.raises(LaunchError, match=f"^{broken}: not a Fashion-MNIST IDX file \\("):
        data_fmnist.decode(files)


def mapped_kb(array: np.ndarray) -> int:
    """Resident kB of the mapping that holds `array`'s data, in this process."""
    address = array.ctypes.data
    resident, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            low, high = (int(part, 16) for part in head.split("-"))
            inside = low <= address < high
        elif inside and head == "Rss:":
            resident = int(line.split()[1])
    return resident


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/smaps")
def test_a_node_keeps_no_cache_page_mapped_once_its_rows_are_copied(
        prepared: DataSection) -> None:
    arrays = plan_data(prepared, 20).arrays
    maps = arrays.cache_maps()
    assert len(maps) == 4
    assert int(arrays.x_train[::500].sum()) > 0 and mapped_kb(arrays.x_train) > 0  # read: mapped
    node = load_node_data(prepared, list(range(20)), 5)
    assert [mapped_kb(array) for array in maps] == [0, 0, 0, 0]
    assert isinstance(node.x_train, ImageRows)
    assert int(node.x_train.pixels.sum()) > 0  # the node's copies, not the maps
    # arrays handed over are the caller's: never released, whatever they are
    given = type(arrays)(node.x_train.pixels, node.y_train, node.x_train.pixels, node.y_train, 10)
    assert given.cache_maps() == ()
