"""Processes and states that nothing signals, read from /proc: the kit's waits (a checkpoint
file appearing, a killed run's nodes exiting) and the project's own tests' (tests/proc_util.py).

Nothing here sleeps to synchronise: `poll` looks at a state until it holds or a deadline
passes, and its callers fail when the deadline passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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


def poll(predicate: Callable[[], object], timeout_s: float) -> bool:
    """Whether `predicate` came true within `timeout_s`, looking every tenth of a second: for
    states nothing signals (another process's, a file's). Its callers fail when it returns
    False."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """The pids still alive after waiting up to `timeout_s`."""
    poll(lambda: not any(alive(p) for p in pids), timeout_s)
    return [p for p in pids if alive(p)]


def wait_for(predicate: Callable[[], object], timeout_s: float, what: str) -> None:
    """Wait until `predicate` is true; an AssertionError if it is not within `timeout_s`."""
    if not poll(predicate, timeout_s):
        raise AssertionError(f"timed out waiting for {what}")


def node_pids(run_dir: Path) -> dict[int, int]:
    """Node id -> pid from the first line each launched node writes to its log."""
    out = {}
    for log in (run_dir / "logs").glob("node-*.log"):
        first = log.read_text().split("\n", 1)[0].split()
        if len(first) >= 4 and first[0] == "node" and first[2] == "pid":
            out[int(first[1])] = int(first[3])
    return out
