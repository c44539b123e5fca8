"""Process-table helpers for tests that kill things: read /proc, never guess."""

from __future__ import annotations

import time
from pathlib import Path


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] != "Z"


def children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for child in children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """The pids still alive after waiting up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def node_pids(run_dir: Path) -> dict[int, int]:
    """Node id -> pid from the first line each launched node writes to its log."""
    out = {}
    for log in (run_dir / "logs").glob("node-*.log"):
        first = log.read_text().split("\n", 1)[0].split()
        if len(first) >= 4 and first[0] == "node" and first[2] == "pid":
            out[int(first[1])] = int(first[3])
    return out
