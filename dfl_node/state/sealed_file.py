"""Safetensors files that carry their own digest: every checkpoint and every final model.

Safetensors has no checksum, so a flipped bit in a weight or a changed generator state reads
back without complaint and a resumed run silently differs. Each file written here holds the
SHA-256 of its own contents in its header's metadata (key `dfl_mesh_sha256`), and `check`
refuses a file whose contents do not match it.

Why inside the file and not in a sidecar beside it:

- One file is one rename: the digest appears in the same atomic rename that makes the file
  appear (temporary file, fsync, rename, fsync of the directory), so there is no moment at
  which a file exists without its digest. A sidecar needs a second file whose life is not the
  file's: an orphan when the writer dies between the two, a stale one when the file is
  replaced or copied without it.
- It travels with the file: a copied, moved or restored file brings its digest, so a copy
  under another file's name stays checkable (what the name promises, e.g. a checkpoint's
  round, is checked against the metadata the digest covers: checkpoint_check.py).
- The file stays plain safetensors: any tool reads it; the digest is one more metadata string.

What the digest covers: the header without the digest as canonical JSON (every tensor's name,
dtype, shape and offsets, and every other metadata entry: a checkpoint's JSON document with its
round, generator states and ledgers), then every byte of tensor data. A changed bit anywhere, a
changed metadata value, a cut file and trailing bytes all fail the check. It guards against
accidents (a bad disk, a torn copy, a stale file), not against an attacker, who could write a
matching digest. SHA-256 because hashlib's runs on the CPU's SHA extensions (about 1 GB/s on
one core here): docs/checkpoints.md has the cost per checkpoint.

No torch here: the launcher checks a run's checkpoints before it starts any node.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dfl_config.errors import DflMeshError

DIGEST_KEY = "dfl_mesh_sha256"  # the metadata key of a file's digest
_METADATA = "__metadata__"  # safetensors' header key of the free-form string metadata
_LENGTH = struct.Struct("<Q")  # safetensors: the header's length, 8 bytes little-endian
_ALIGN = 8  # safetensors pads the header with spaces so that tensor data starts aligned


class CorruptFile(ValueError, DflMeshError):
    """A file that fails its check. The message is one line: the file, then the reason."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class Sealed:
    """A file that passed its check: its metadata (without the digest) and its digest."""

    metadata: dict[str, str]
    digest: str


def write(path: Path, body: bytes) -> str:
    """Write `body`, a safetensors serialization (`safetensors.torch.save`), to `path` with its
    digest in its metadata, atomically; the digest."""
    length = _LENGTH.unpack_from(body)[0]
    header = json.loads(body[_LENGTH.size:_LENGTH.size + length])
    data = memoryview(body)[_LENGTH.size + length:]
    digest = _digest(header, data)
    header[_METADATA] = {**(header.get(_METADATA) or {}), DIGEST_KEY: digest}
    head = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    head += b" " * (-(_LENGTH.size + len(head)) % _ALIGN)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as handle:
        handle.write(_LENGTH.pack(len(head)))
        handle.write(head)
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return digest


def verify(path: Path) -> Sealed:
    """Check `path` against its digest; CorruptFile (one line) if it fails. What a reader of a
    final model calls before trusting it (`dfl_mesh.load(RUN_DIR).verify()` checks them all)."""
    return read(path)[1]


def read(path: Path) -> tuple[bytes, Sealed]:
    """The contents of `path`, checked against its digest."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorruptFile(path, f"unreadable: {exc.strerror or exc}") from None
    return data, check(data, path)


def check(data: bytes, path: Path) -> Sealed:
    """`data`, the contents of `path`, checked against the digest it carries."""
    if len(data) < _LENGTH.size:
        raise CorruptFile(path, f"truncated: {len(data)} bytes, not even a header")
    length = _LENGTH.unpack_from(data)[0]
    start = _LENGTH.size + length
    if start > len(data):
        raise CorruptFile(path, f"truncated: {len(data)} bytes, but its header alone says "
                                f"{start} (or not a safetensors file)")
    try:
        header = json.loads(data[_LENGTH.size:start])
        end = max([_end(entry) for name, entry in header.items() if name != _METADATA],
                  default=0)
        metadata = dict(header.get(_METADATA) or {})
    except (ValueError, TypeError, AttributeError, KeyError, IndexError):
        raise CorruptFile(path, "not a safetensors file (its header is not one)") from None
    if len(data) - start != end:
        reason = (f"truncated: {len(data)} of {start + end} bytes" if len(data) - start < end
                  else f"too long: {len(data)} bytes, its header says {start + end}")
        raise CorruptFile(path, reason)
    recorded = metadata.pop(DIGEST_KEY, None)
    if recorded is None:
        raise CorruptFile(path, "it carries no digest (written by an older dfl-mesh, or "
                                "by another program)")
    if _digest(header, memoryview(data)[start:]) != recorded:
        raise CorruptFile(path, "its bytes do not match its digest (a tensor or metadata "
                                "value changed since it was written)")
    return Sealed(metadata, recorded)


def _end(entry: Any) -> int:
    """Where a tensor's bytes end in the data section (its header entry's second offset)."""
    return int(entry["data_offsets"][1])


def _digest(header: dict[str, Any], data: memoryview) -> str:
    """SHA-256 of the header without the digest, as canonical JSON, then of the tensor data."""
    plain = {**header, _METADATA: {k: v for k, v in (header.get(_METADATA) or {}).items()
                                   if k != DIGEST_KEY}}
    digest = hashlib.sha256(json.dumps(plain, separators=(",", ":"), sort_keys=True).encode())
    digest.update(data)
    return digest.hexdigest()
