"""Data preparation, run once by the launcher before any node starts.

A real dataset is found (`data_fmnist`, `data_cifar`), fingerprinted by the content of its
source files, and decoded into the cache (`dfl_node.learning.datacache`) unless an entry with that
fingerprint is already there: the second run with the same data costs a stat of each source
file (their hashes are remembered with their stats).
Concurrent runs are safe: the decode happens under an exclusive lock per entry, into a temporary
directory beside it, renamed into place as a whole; a run that finds the entry complete never
takes the lock. The partition and evaluation split are then computed once for the plan's node
count, so a bad `--partition` is a user error (exit 2) before any process starts.

A host given a plan made elsewhere (`dfl-node --plan`, a Slurm job's host) decodes its own copy
the same way (`ensure_host_data`), and the fingerprint proves the copy is the plan's.

A dataset a protocol brings (`ProtocolDeclaration.datasets`, read through the registry) is the
protocol's to check and describe; each node makes its own share, so nothing is cached.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from dfl_config.problems import one_line
from dfl_node.learning.datacache import (
    ARRAYS,
    FORMAT,
    META,
    DataError,
    Meta,
    cache_root,
    entry_name,
    locate_entry,
    read_meta,
)
from dfl_node.learning.datasets import load_arrays
from dfl_node.learning.generated import dataset_clash, generated_datasets
from dfl_node.learning.given import given_arrays
from dfl_node.learning.given_names import GIVEN_DATASET
from dfl_node.learning.partition import PartitionError
from dfl_node.learning.shards import split_indices
from dfl_node.plan import RunPlan
from dfl_node.settings.data_section import DEFAULT_EVAL_SIZE, EVAL_SPLITS, DataSection
from dfl_node.settings.partition import parse_partition
from launcher.data import cifar10 as data_cifar
from launcher.data import fashion_mnist as data_fmnist
from launcher.data.source import Source
from launcher.errors import LaunchError
from protocols.registry import dataset_preparers

DIGESTS = "digests.json"  # the cache root's record of source files' sha256 (see fingerprint)


def datasets() -> tuple[str, ...]:
    """Every `--dataset` name: generated, brought by a protocol, and the two on disk. A
    function, not a constant: the protocols that bring datasets are loaded when it is asked,
    not when a node imports this module."""
    return (*generated_datasets(), *dataset_preparers(), "fmnist", "cifar10")


def prepare_data(config: dict[str, Any], num_nodes: int | None = None) -> dict[str, Any]:
    """Keys to merge into the plan's data section, after preparing the dataset's cache entry.

    Adds `eval_size` always; `num_classes` and `shape` (one sample's shape); and for real
    datasets `cache_dir` and `fingerprint` (sha256 of the sources). The partition's spelling is
    checked for every dataset; with `num_nodes`, also that the partition and evaluation split
    work for that many nodes.
    """
    eval_size = config.get("eval_size", DEFAULT_EVAL_SIZE)
    if isinstance(eval_size, bool) or not isinstance(eval_size, int) or eval_size < 1:
        raise LaunchError(f"eval_size: must be a positive integer, got {eval_size!r}")
    if config["eval_split"] not in EVAL_SPLITS:
        raise LaunchError(f"eval_split: must be one of {', '.join(EVAL_SPLITS)}, "
                          f"got {config['eval_split']!r}")
    try:
        parse_partition(str(config["partition"]))
    except PartitionError as exc:
        raise LaunchError(f"partition: {exc}") from None
    brought = dataset_preparers()
    if config["dataset"] in brought:  # made by each node: nothing to prepare or split
        try:
            return brought[config["dataset"]](config)
        except ValueError as exc:
            raise LaunchError(f"{config['dataset']}: {exc}") from None
    generated = generated_datasets().get(config["dataset"])
    extra: dict[str, Any]
    if config["dataset"] == GIVEN_DATASET:  # handed over as arrays (launcher/config/given.py)
        extra = given_extra(config[GIVEN_DATASET])
    elif generated is not None:
        try:
            arrays = generated.arrays(config[config["dataset"]], config["seed"])
        except ValidationError as exc:
            name = config["dataset"]
            raise LaunchError(f"{name}: {one_line(exc, generated.options, (name,))}") from None
        extra = {"num_classes": arrays.classes, "shape": list(arrays.x_train.shape[1:])}
    else:
        source = locate(config["dataset"], config["data_root"])
        try:
            entry, meta = ensure_entry(source, cache_root())
        except OSError as exc:
            raise LaunchError(f"{source.dataset}: preparing {source.description} in the cache "
                              f"{cache_root()} failed: {exc} (DFL_MESH_CACHE picks another "
                              "directory)") from None
        extra = {"cache_dir": str(entry), "fingerprint": meta.fingerprint,
                 "num_classes": meta.classes, "shape": list(meta.shape)}
    extra["eval_size"] = eval_size
    if num_nodes is not None:
        check_split(config, extra, num_nodes)
    return extra


def given_extra(given: dict[str, Any]) -> dict[str, Any]:
    """The data section's keys for arrays handed over: their fingerprint (which finds them in
    a node: dfl_node/learning/given.py) and, given one set per node, each node's row count."""
    try:
        arrays = given_arrays(given["fingerprint"])
    except DataError as exc:
        raise LaunchError(str(exc)) from None
    extra: dict[str, Any] = {"fingerprint": given["fingerprint"], "num_classes": arrays.classes,
                             "shape": list(arrays.x_train.shape[1:])}
    if given["node_sizes"] is not None:
        extra["node_sizes"] = list(given["node_sizes"])
    return extra


def check_split(config: dict[str, Any], extra: dict[str, Any], num_nodes: int) -> None:
    keys = ("dataset", "data_root", "partition", "eval_split", "seed")
    section = plan_section({**{key: config[key] for key in keys},
                            **{name: config[name] for name in generated_datasets()}, **extra})
    arrays = load_arrays(section)
    try:
        split_indices(section, arrays.y_train, arrays.y_test, num_nodes)
    except PartitionError as exc:
        raise LaunchError(f"partition: {exc}") from None
    except DataError as exc:
        raise LaunchError(str(exc)) from None


def plan_section(written: Mapping[str, Any]) -> DataSection:
    """The plan's data section of `written`'s keys; LaunchError (one line) on a bad one, such
    as a misspelt partition."""
    try:
        return DataSection.model_validate(written)
    except ValidationError as exc:
        raise LaunchError(one_line(exc, DataSection)) from None


def locate(dataset: str, data_root: str | None) -> Source:
    root = Path(data_root).expanduser().absolute() if data_root else None
    if dataset == "fmnist":
        return data_fmnist.locate(root, cache_root() / "downloads")
    if dataset == "cifar10":
        return data_cifar.locate(root)
    clash = dataset_clash(dataset)
    if clash:
        raise LaunchError(f"dataset: {clash}")
    raise LaunchError(f"dataset: unknown dataset {dataset!r} (known: {', '.join(datasets())})")


def fingerprint(source: Source, root: Path) -> str:
    """sha256 over the format version, the dataset and every source file's name and content.

    Each file's own sha256 is remembered in the cache root's DIGESTS with the file's stat, so
    a run with the same files reads no byte of them (hashing Fashion-MNIST's took a tenth of
    the launcher's planning)."""
    memo = root / DIGESTS
    try:
        known: dict[str, list[Any]] = json.loads(memo.read_text())
    except (OSError, ValueError):
        known = {}
    before = json.dumps(known, sort_keys=True)
    digest = hashlib.sha256(f"dfl-mesh data format {FORMAT}\n{source.dataset}\n".encode())
    for path, name in source.files:
        digest.update(f"{name} {file_digest(path, known)}\n".encode())
    if json.dumps(known, sort_keys=True) != before:
        with contextlib.suppress(OSError):  # a cache it cannot write to only costs the hashing
            root.mkdir(parents=True, exist_ok=True)
            tmp = memo.with_name(f".{memo.name}.tmp-{os.getpid()}")
            tmp.write_text(json.dumps(known, sort_keys=True))
            os.replace(tmp, memo)
    return digest.hexdigest()


def file_digest(path: Path, known: dict[str, list[Any]]) -> str:
    """`path`'s sha256 hex digest: the one in `known` when the file's size, mtime, ctime, inode
    and device are the ones recorded with it (writing to a file sets its ctime, which no
    call can set back), else read from the file and recorded."""
    st = path.stat()
    stamp: list[Any] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
    recorded = known.get(str(path))
    if recorded is not None and recorded[:-1] == stamp:
        return str(recorded[-1])
    with path.open("rb") as handle:
        value = hashlib.file_digest(handle, "sha256").hexdigest()
    known[str(path)] = [*stamp, value]
    return value


def ensure_entry(source: Source, root: Path) -> tuple[Path, Meta]:
    """The cache entry for `source`, decoding it only if no complete entry exists yet."""
    key = fingerprint(source, root)
    entry = root / entry_name(source.dataset, key)
    meta = read_meta(entry)
    if meta is None:
        root.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(root / f"{entry.name}.lock"):
            meta = read_meta(entry) or build_entry(source, key, entry)
    return entry, meta


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield  # closing the file releases the lock, also when the process dies


def build_entry(source: Source, key: str, entry: Path) -> Meta:
    """Decode `source` into a temporary directory, then rename it to `entry` (lock held)."""
    for leftover in [*entry.parent.glob(f".{entry.name}.tmp-*"), entry]:
        if leftover.exists():  # from a run that died mid-write: nobody else can be writing
            shutil.rmtree(leftover)
    tmp = entry.parent / f".{entry.name}.tmp-{os.getpid()}"
    tmp.mkdir()
    decoded = source.decode()
    for name in ARRAYS:
        np.save(tmp / f"{name}.npy", np.ascontiguousarray(getattr(decoded, name)),
                allow_pickle=False)
    mean, std = channel_stats(decoded.x_train)
    meta = Meta(dataset=source.dataset, fingerprint=key, source=source.description,
                classes=source.classes, shape=tuple(decoded.x_train.shape[1:]),
                train_size=len(decoded.y_train), test_size=len(decoded.y_test), mean=mean,
                std=std)
    (tmp / META).write_text(meta.to_json())
    os.replace(tmp, entry)
    return meta


def channel_stats(x: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Exact per-channel mean and std of uint8 (N, C, H, W) images scaled to [0, 1].

    Computed from 256-bin histograms, so it needs no float copy of the whole training set.
    """
    levels = np.arange(256) / 255.0
    means, stds = [], []
    for c in range(x.shape[1]):
        p = np.bincount(x[:, c].ravel(), minlength=256) / (x.shape[0] * x[0, c].size)
        mean = float(p @ levels)
        means.append(mean)
        stds.append(float(np.sqrt(p @ (levels - mean) ** 2)) or 1.0)
    return tuple(means), tuple(stds)


def ensure_host_data(plan: RunPlan, data_root: str | None) -> None:
    """This host's cache entry of the plan's dataset, decoded from `data_root` (else the plan's
    `data_root`, else the usual places) when the cache lacks it."""
    data = plan.data
    if data.dataset == GIVEN_DATASET:  # only in the process it was handed to, or its forks
        given_extra({"fingerprint": str(data.fingerprint), "node_sizes": None})
        return
    prepared = data.prepared_entry()
    if prepared is None:  # generated by each node (synthetic, scenes): nothing to load
        return
    try:
        locate_entry(*prepared)
        return
    except DataError:
        pass
    source = locate(data.dataset, data_root or data.data_root)
    try:
        _, meta = ensure_entry(source, cache_root())
    except OSError as exc:
        raise LaunchError(f"{data.dataset}: preparing {source.description} in the cache "
                          f"{cache_root()} failed: {exc}") from None
    if meta.fingerprint != prepared[1]:
        raise LaunchError(f"{data.dataset}: this host's files ({source.description}) are not "
                          f"the plan's (fingerprint {meta.fingerprint[:16]}, plan "
                          f"{prepared[1][:16]})")
