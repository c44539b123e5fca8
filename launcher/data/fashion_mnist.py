"""Fashion-MNIST: find the four IDX files, or have torchvision download them, and decode them.

Looked for, in order: with `--data-root DIR`, torchvision's layout `DIR/FashionMNIST/raw/` and
then `DIR/` itself; without it, Debian's `dataset-fashion-mnist` package
(`/usr/share/datasets/fashion-mnist/`) and then an earlier download (the cache's
`downloads/FashionMNIST/raw/`). If none holds them, torchvision downloads them into `DIR` (or
the cache's `downloads/`) when the network allows. torchvision's MNIST readers decode the IDX
files; they read plain files only, so a gzip file is first decompressed into a scratch folder.
"""

from __future__ import annotations

import tempfile
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


def read_arrays(files: dict[str, Path]) -> dict[str, np.ndarray]:
    """The four arrays, images uint8 (N, H, W) and labels int64 (N,), as torchvision reads them.

    torchvision is imported here, not at the top: it is slow to import and decoding only
    happens on a cache miss."""
    from torchvision.datasets.mnist import read_image_file, read_label_file
    from torchvision.datasets.utils import extract_archive

    arrays = {}
    with tempfile.TemporaryDirectory(prefix="dfl-fmnist-") as scratch:
        for name, path in files.items():
            read = read_image_file if name.startswith("x_") else read_label_file
            try:
                plain = Path(extract_archive(path, scratch)) if path.suffix == ".gz" else path
                arrays[name] = read(str(plain)).numpy()
            except Exception as exc:  # torchvision asserts and raises many kinds on a bad file
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise LaunchError(f"{path}: not a Fashion-MNIST IDX file ({reason})") from None
    return arrays


def decode(files: dict[str, Path]) -> Decoded:
    arrays = read_arrays(files)
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if len(x) != len(y) or y.max() >= 10:
            raise LaunchError(f"{files[f'x_{split}']}: images {x.shape} and labels {y.shape} "
                              "do not form a Fashion-MNIST split")
    return Decoded(x_train=arrays["x_train"][:, None], y_train=arrays["y_train"],
                   x_test=arrays["x_test"][:, None], y_test=arrays["y_test"])


def download(root: Path) -> None:
    """torchvision's download into `root/FashionMNIST/raw`."""
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
