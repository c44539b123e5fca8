"""Fashion-MNIST: find the four IDX files, or have torchvision download them, and decode them.

Looked for, in order: with `--data-root DIR`, torchvision's layout `DIR/FashionMNIST/raw/` and
then `DIR/` itself; without it, Debian's `dataset-fashion-mnist` package
(`/usr/share/datasets/fashion-mnist/`) and then an earlier download (the cache's
`downloads/FashionMNIST/raw/`). If none holds them, torchvision downloads them into `DIR` (or
the cache's `downloads/`) when the network allows. The IDX format is parsed here directly: a
fixed binary header plus raw bytes, nothing to deserialise.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from launcher.data.source import Decoded, Source
from launcher.errors import LaunchError

DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
# Array name -> IDX file stem, shared by torchvision and Debian.
STEMS = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
IDX_UBYTE = 0x08


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (gzip or plain) of unsigned bytes as an array of its declared shape."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != IDX_UBYTE:
        raise LaunchError(f"{path}: not an IDX file of unsigned bytes")
    ndim = raw[3]
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise LaunchError(f"{path}: header says {dims}, file holds {body.size} values")
    return body.reshape(dims)


def find_files(directory: Path) -> dict[str, Path] | None:
    """The four files in `directory` (gzip preferred), or None if any is missing."""
    found = {}
    for name, stem in STEMS.items():
        candidates = [directory / f"{stem}.gz", directory / stem]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            return None
        found[name] = path
    return found


def decode(files: dict[str, Path]) -> Decoded:
    arrays = {name: read_idx(path) for name, path in files.items()}
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y) or y.max() >= 10:
            raise LaunchError(f"{files[f'x_{split}']}: images {x.shape} and labels {y.shape} "
                              "do not form a Fashion-MNIST split")
    return Decoded(x_train=arrays["x_train"][:, None], y_train=arrays["y_train"].astype(np.int64),
                   x_test=arrays["x_test"][:, None], y_test=arrays["y_test"].astype(np.int64))


def download(root: Path) -> None:
    """torchvision's download into `root/FashionMNIST/raw` (the only use of torchvision)."""
    from torchvision.datasets import FashionMNIST

    for train in (True, False):
        FashionMNIST(str(root), train=train, download=True)


def locate(data_root: Path | None, downloads: Path) -> Source:
    root = data_root if data_root is not None else downloads
    raw = root / "FashionMNIST" / "raw"
    looked = [raw, root] if data_root is not None else [DEBIAN_DIR, raw]
    for directory in looked:
        if files := find_files(directory):
            return source(files, directory)
    try:
        download(root)
    except Exception as exc:  # any failure of the optional download means "not available"
        reason = str(exc).splitlines()[-1] if str(exc) else type(exc).__name__
        where = ", ".join(str(p) for p in looked)
        raise LaunchError(f"fmnist: no Fashion-MNIST IDX files in {where}, and torchvision "
                          f"could not download them into {root} ({reason}); install Debian's "
                          "package (apt-get install dataset-fashion-mnist) or pass --data-root "
                          "DIR holding train-images-idx3-ubyte.gz and the other three") from None
    files = find_files(raw)
    if files is None:
        raise LaunchError(f"fmnist: torchvision's download left no IDX files in {raw}")
    return source(files, raw)


def source(files: dict[str, Path], directory: Path) -> Source:
    return Source(dataset="fmnist", description=f"IDX files in {directory}",
                  files=tuple((path, path.name) for path in files.values()),
                  decode=lambda: decode(files))
