"""Process-table helpers for tests that kill things: read /proc, never guess."""

from __future__ import annotations

from pathlib import Path

# The waits and the process table moved into the kit, which plugin authors' tests use too.
from dfl_mesh.testing.processes import (
    alive,
    children,
    descendants,
    node_pids,
    poll,
    wait_for,
    wait_gone,
)

__all__ = ["alive", "children", "descendants", "listening", "node_pids", "poll", "wait_for",
           "wait_gone"]


def listening(port: int) -> bool:
    """Whether some process on this machine listens on TCP `port` (read from /proc/net)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                return True
    return False
