"""Real mounts for tests of a run directory's storage: a small tmpfs (a disk that fills) and a
read-only bind mount (a directory that stops taking writes). Root only; each is unmounted when
its block ends, whatever happened inside."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import require


def mounting_allowed() -> None:
    """Skip (fail under CI=true) where this process may not mount."""
    require(os.geteuid() == 0, "mounting a tmpfs needs root")


@contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's notation: 20m) at `where`, made if need be."""
    mounting_allowed()
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                   check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """`folder` read-only from now on, for every path that looks it up (a bind mount of it
    over itself): files already open for writing stay writable, as on a real remount."""
    mounting_allowed()
    subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(where: Path, leave_bytes: int) -> None:
    """Write a filler file into the file system of `where` until `leave_bytes` are free."""
    stat = os.statvfs(where)
    free = stat.f_bavail * stat.f_frsize
    with (where / "filler").open("wb") as out:
        chunk = b"\0" * (1 << 20)
        left = max(0, free - leave_bytes)
        while left > 0:
            left -= out.write(chunk[:min(left, len(chunk))])
