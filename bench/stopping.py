"""How the suite stops on Ctrl-C, SIGTERM and SIGHUP: with every process it started.

A job scheduler's or CI's time limit sends SIGTERM, a closed terminal SIGHUP; both stop the
suite as Ctrl-C does (launcher/stop_signals.py: `Stopped`, a KeyboardInterrupt, and the same
exit codes as dfl-launch: 130, 143, and 1 for SIGHUP), so the groups measured until then keep
their rows.

Why the suite stops its processes itself: a signal may reach the suite alone (`kill PID`, a
scheduler that signals the main process), and a group's processes outlive it then: a launcher
runs its mesh to the end as an orphan, a `spawn` child of multiprocessing holds the exit of the
interpreter in its join. Once a group's code unwinds, the way back to them is gone (a launcher
killed by subprocess.run leaves its nodes to init). So the handler, before it raises, takes the
tree of the suite's descendants from /proc, asks the direct children to stop (SIGTERM: the
launcher stops its nodes in order; for Ctrl-C, SIGINT to those outside the suite's process
group, which the terminal's Ctrl-C did not reach: first_run's launchers run in sessions of
their own), waits up to STOP_GRACE_S for the whole tree to end, and SIGKILLs what is left. A
second signal during that wait cuts it short.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from launcher import process_table
from launcher.stop_signals import Stopped

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOP_GRACE_S = 30.0  # a launcher's orderly stop of 20 nodes takes seconds, loaded minutes more
POLL_S = 0.1
KILLED_S = 10.0  # for SIGKILLed processes to end: the kernel needs far less, even loaded


@dataclass(frozen=True)
class Process:
    """A process, told apart from a later one with its pid by its start time
    (launcher/process_table.py), with its parent and process group."""

    pid: int
    started: str
    parent: int
    group: int


def descendants(root: int) -> list[Process]:
    """Every process below `root`, parents before their children, from /proc/PID/stat."""
    children: dict[int, list[Process]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:  # the fields after the command name: state, parent, group, ..., start time
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        proc = Process(int(entry), fields[19], int(fields[1]), int(fields[2]))
        children.setdefault(proc.parent, []).append(proc)
    found: list[Process] = []
    todo = [root]
    while todo:
        for proc in children.get(todo.pop(0), []):
            found.append(proc)
            todo.append(proc.pid)
    return found


def running(proc: Process) -> bool:
    """Still this process and not yet ended (a zombie has ended: it waits to be reaped)."""
    return process_table.running(proc.pid, proc.started)


def _signal(proc: Process, signum: int) -> None:
    if running(proc):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signum)


def stop_tree(signum: int, hurry: Callable[[], bool] = lambda: False) -> None:
    """Stop every descendant of this process: the direct children asked (SIGTERM; for SIGINT,
    SIGINT to those outside this process group), then up to STOP_GRACE_S for the whole tree,
    then SIGKILL. `hurry()` true ends the wait early."""
    me = os.getpid()
    tree = descendants(me)
    for proc in tree:
        if proc.parent == me and signum != signal.SIGINT:
            _signal(proc, signal.SIGTERM)
        elif proc.parent == me and proc.group != os.getpgrp():
            _signal(proc, signal.SIGINT)
    deadline = time.monotonic() + STOP_GRACE_S
    while any(running(p) for p in tree) and time.monotonic() < deadline and not hurry():
        time.sleep(POLL_S)
    left = [*tree, *descendants(me)]  # and any started meanwhile
    for proc in left:
        _signal(proc, signal.SIGKILL)
    # the kernel ends a killed process at once, but not within the kill call: the suite exits
    # only when none of them runs, so that nothing it started outlives it
    deadline = time.monotonic() + KILLED_S
    while any(running(p) for p in left) and time.monotonic() < deadline:
        time.sleep(POLL_S)


class SuiteStop:
    """The installed handlers' state: the first stop signal (None: none yet), and whether a
    second one came to cut the wait short."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.hurry = False

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.signum is not None:  # a stop is under way: end its wait now
            self.hurry = True
            return
        self.signum = signum
        stop_tree(signum, lambda: self.hurry)
        raise Stopped(signum)


_before: dict[int, Any] = {}  # the handlers that `installed` replaced, while it runs


def _restore_in_child() -> None:
    """A process forked by a group (multiprocessing's fork context: round_cost's and overhead's
    raw peers) gets the handlers from before: its stop is not the suite's."""
    for signum, handler in _before.items():
        with contextlib.suppress(ValueError):  # forked from a thread other than the main one
            signal.signal(signum, handler)
    _before.clear()


os.register_at_fork(after_in_child=_restore_in_child)


@contextlib.contextmanager
def installed() -> Iterator[SuiteStop]:
    """Until the block ends, Ctrl-C, SIGTERM and SIGHUP stop the suite's processes and raise
    `Stopped` (a KeyboardInterrupt) where the suite is, once; later ones are not raised."""
    stop = SuiteStop()
    _before.update({signum: signal.signal(signum, stop.handle) for signum in HANDLED})
    try:
        yield stop
    finally:
        for signum, handler in _before.items():
            signal.signal(signum, handler)
        _before.clear()
