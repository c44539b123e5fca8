"""Which code made a reproduction's numbers. The outputs of an experiment are written by one
checkout, but its runs may have been made by several: a reproduction runs for hours, is
resumed across sessions, and keeps every finished run. Each run this package finishes is
stamped with the checkout that finished it, and the outputs list those stamps beside their
own commit."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAMP = "reproduced_at.json"
"""In a run directory: {"commit": ...}, the checkout that finished the run."""
UNSTAMPED = "unknown"


def checkout_commit() -> str:
    """This checkout's commit ('+' when it had changes), or 'unknown' outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return UNSTAMPED
    return head + ("+" if dirty else "")


def stamp(run_dirs: Iterable[Path], commit: str) -> None:
    """Mark each run directory as finished by `commit`."""
    for run_dir in run_dirs:
        (run_dir / STAMP).write_text(json.dumps({"commit": commit}) + "\n")


def run_commits(run_dirs: Iterable[Path]) -> list[str]:
    """The distinct commits that finished these runs, sorted; 'unknown' for a run finished
    before runs were stamped (or by hand)."""
    found = set()
    for run_dir in run_dirs:
        path = run_dir / STAMP
        try:
            found.add(str(json.loads(path.read_text())["commit"]))
        except (OSError, ValueError, KeyError, TypeError):
            found.add(UNSTAMPED)
    return sorted(found)
