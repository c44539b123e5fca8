"""Another process, by its pid and the kernel's start time: a pid alone may be reused.

A node watches its launcher this way (launcher/node_cli.py), and the launcher the nodes its
zygote forked once the zygote is gone and they are no longer anyone's children it can wait for
(launcher/backends/zygote.py).
"""

from __future__ import annotations

from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (None once it is gone): a pid plus this names one
    process even if the pid is later reused."""
    fields = _stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def running(pid: int, started: str | None) -> bool:
    """Whether the process that had `pid` and started at `started` still runs (a zombie,
    dead but not yet reaped by its parent, does not)."""
    fields = _stat(pid)
    return (started is not None and fields is not None and len(fields) > 19
            and fields[19] == started and fields[0] != "Z")
