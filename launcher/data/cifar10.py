"""CIFAR-10 from JPEG/PNG images: an ImageFolder tree or its .tar.gz archive, decoded with PIL.

`--data-root` may be the tree itself (`train/<class>/*`, `test/<class>/*`), a directory holding
`cifar10-jpeg.tar.gz` or a `cifar10-jpeg/` tree, or the archive file. Class indices follow
CIFAR-10's label order; samples are ordered by split, class, file
name, so the arrays do not depend on archive or directory order. torchvision's
`cifar-10-batches-py` is refused: those files are pickles, and dfl-mesh never unpickles.
The archive is streamed and decoded in memory; nothing is extracted to disk.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import numpy as np

from launcher.data.source import Decoded, Source
from launcher.errors import LaunchError

CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
           "truck")
SPLITS = ("train", "test")
ARCHIVE = "cifar10-jpeg.tar.gz"
SIDE = 32
HOW = ("pass --data-root an ImageFolder tree (train/<class>/, test/<class>/) or "
       "a directory holding cifar10-jpeg.tar.gz, or that archive itself")


def image_key(parts: tuple[str, ...], where: str) -> tuple[str, int, str] | None:
    """(split, label, file name) of an image path ending in <split>/<class>/<file>, else None."""
    if len(parts) < 3 or parts[-3] not in SPLITS:
        return None
    if parts[-2] not in CLASSES:
        raise LaunchError(f"cifar10: {where}: {parts[-2]!r} is not a CIFAR-10 class "
                          f"({', '.join(CLASSES)})")
    return parts[-3], CLASSES.index(parts[-2]), parts[-1]


def decode_image(blob: bytes, where: str) -> np.ndarray:
    from PIL import Image  # here: only a cache miss decodes, and every launch imports this module

    try:
        with Image.open(io.BytesIO(blob)) as image:
            pixels = np.asarray(image.convert("RGB"))
    except OSError as exc:
        raise LaunchError(f"cifar10: {where}: cannot decode image ({exc})") from None
    if pixels.shape != (SIDE, SIDE, 3):
        raise LaunchError(f"cifar10: {where}: image is {pixels.shape[1]}x{pixels.shape[0]}, "
                          f"not {SIDE}x{SIDE}")
    return pixels


def archive_images(path: Path) -> Iterator[tuple[tuple[str, int, str], bytes]]:
    with tarfile.open(path, "r:*") as tar:
        for member in tar:
            key = image_key(PurePosixPath(member.name).parts, f"{path}:{member.name}")
            extracted = tar.extractfile(member) if member.isfile() else None
            if key is not None and extracted is not None:
                yield key, extracted.read()


def tree_files(root: Path) -> list[tuple[tuple[str, int, str], Path]]:
    """Every <split>/<class>/<file> under `root`, listed with os.scandir (60k files: fast)."""
    found = []
    for split in SPLITS:
        for class_dir in os.scandir(root / split):
            if not class_dir.is_dir():
                continue
            for file in os.scandir(class_dir.path):
                key = image_key((split, class_dir.name, file.name), file.path)
                if key is not None and file.is_file():
                    found.append((key, Path(file.path)))
    return found


def assemble(images: Iterator[tuple[tuple[str, int, str], bytes]], where: str) -> Decoded:
    """Decode every image and stack each split in (label, file name) order, NCHW."""
    decoded: dict[str, list[tuple[int, str, np.ndarray]]] = {s: [] for s in SPLITS}
    for (split, label, name), blob in images:
        decoded[split].append((label, name, decode_image(blob, f"{where}: {split}/{name}")))
    arrays = {}
    for split, items in decoded.items():
        if not items:
            raise LaunchError(f"cifar10: {where} holds no {split}/<class>/ images; {HOW}")
        items.sort(key=lambda item: item[:2])
        arrays[f"x_{split}"] = np.stack([px for *_, px in items]).transpose(0, 3, 1, 2).copy()
        arrays[f"y_{split}"] = np.array([label for label, *_ in items], dtype=np.int64)
    return Decoded(**arrays)


def archive_source(path: Path) -> Source:
    return Source(dataset="cifar10", description=f"archive {path}", files=((path, path.name),),
                  decode=lambda: assemble(archive_images(path), str(path)))


def tree_source(root: Path) -> Source:
    files = sorted(tree_files(root), key=lambda item: item[0])
    return Source(
        dataset="cifar10", description=f"ImageFolder tree {root}",
        files=tuple((path, f"{split}/{CLASSES[label]}/{name}")
                    for (split, label, name), path in files),
        decode=lambda: assemble(((key, path.read_bytes()) for key, path in files), str(root)))


def locate(data_root: Path | None) -> Source:
    if data_root is None:
        raise LaunchError(f"cifar10: no --data-root given; {HOW}")
    if data_root.is_file():
        return archive_source(data_root)
    for tree in (data_root, data_root / "cifar10-jpeg"):
        if all((tree / split).is_dir() for split in SPLITS):
            return tree_source(tree)
    if (data_root / ARCHIVE).is_file():
        return archive_source(data_root / ARCHIVE)
    pickled = data_root / "cifar-10-batches-py"
    if not data_root.exists():
        why = "it does not exist"
    elif pickled.exists():
        why = f"{pickled} is torchvision's pickled format, which dfl-mesh does not read"
    else:
        why = f"found no train/ and test/ trees and no {ARCHIVE}"
    raise LaunchError(f"cifar10: nothing usable at {data_root} ({why}); {HOW}")
