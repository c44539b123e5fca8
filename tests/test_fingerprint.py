"""The data cache's key: a source file is read only when it changed (its stat vouches for the
sha256 remembered with it); a changed file gives another key."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from launcher.data.prepare import DIGESTS, fingerprint
from launcher.data.source import Source


def source(path: Path) -> Source:
    return Source(dataset="toy", description="a file", files=((path, path.name),),
                  decode=lambda: None)  # type: ignore[arg-type,return-value]


def test_an_unchanged_file_is_not_read_again(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "train.gz"
    data.write_bytes(b"0123456789")
    first = fingerprint(source(data), tmp_path / "cache")
    assert (tmp_path / "cache" / DIGESTS).is_file()

    def unread(*args: object) -> None:
        raise AssertionError("read again")

    monkeypatch.setattr(hashlib, "file_digest", unread)
    assert fingerprint(source(data), tmp_path / "cache") == first


def test_a_replaced_file_gives_another_key_even_with_the_old_size_and_mtime(
        tmp_path: Path) -> None:
    data = tmp_path / "train.gz"
    data.write_bytes(b"0123456789")
    first = fingerprint(source(data), tmp_path / "cache")
    stat = data.stat()
    new = tmp_path / "new.gz"
    new.write_bytes(b"9876543210")
    os.utime(new, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(new, data)
    assert fingerprint(source(data), tmp_path / "cache") != first


def test_an_unwritable_cache_only_costs_the_hashing(tmp_path: Path) -> None:
    data = tmp_path / "train.gz"
    data.write_bytes(b"0123456789")
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    assert fingerprint(source(data), blocked / "cache") == fingerprint(source(data),
                                                                       tmp_path / "cache")
