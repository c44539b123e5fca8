"""How large a user's input may be, declared once for every layer that reads it.

Why: what a run is given is copied into what it writes and into every node: a topology's name
into plan.json, summary.json and config.yaml and into every node's plan, a config value into
config.yaml and the plan. A mistake (or a hostile file) of tens of megabytes must be one line
and exit 2 before anything starts, not a run directory of hundreds. The limits are far above
any real input: a generated ring of 100,000 nodes is a 3.4 MB topology file.
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_NAME_CHARS = 100
"""A topology's name: it names run directories (`runs/<time>-<protocol>-<name>`), and a path
component holds at most 255 bytes."""
MAX_FILE_BYTES = 16 << 20
"""A topology file or a config file."""
MAX_SET_CHARS = 64 << 10
"""One `--set KEY=VALUE` (a shell passes at most 128 KiB in one argument; the Python API
none of that limit)."""


def size_text(size: int) -> str:
    """A byte count for a message: in MiB, or GiB from 1 GiB on."""
    if size >= 1 << 30:
        return f"{size / (1 << 30):.3g} GiB"
    return f"{size / (1 << 20):.3g} MiB"


def oversized_file(path: str | Path, what: str) -> str | None:
    """Why the file at `path` is too large to read (one line), or None: checked on its size
    before a byte of it is read. A file that cannot be stat'ed is left to the reader's own
    error."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return None
    if size <= MAX_FILE_BYTES:
        return None
    return f"{path}: {what} of {size_text(size)}, more than one may hold " \
           f"({size_text(MAX_FILE_BYTES)})"
