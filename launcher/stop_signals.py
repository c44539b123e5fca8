"""The signals that stop `dfl-launch`, and what each ends in.

Ctrl-C (SIGINT) raises KeyboardInterrupt, and every place that runs a mesh stops it in order on
one: the nodes stopped, the completed evaluations kept, summary.json written. SIGTERM (a
process manager, `kill`) and SIGHUP (the terminal went away) get the same orderly stop:
their handler raises `Stopped`, a KeyboardInterrupt, so no code path needs to know a second
way of being stopped. Only the exit code tells them apart: 130 for SIGINT, 143 for SIGTERM
(128 + 15, what a shell reports for a process it killed), 1 for SIGHUP (no one is left to read
a special code; the run simply did not finish).

Only the CLI installs the handlers (`installed`): a notebook's kernel or a test that calls
`dfl_mesh.run` keeps its own. A second SIGTERM or SIGHUP while the first one's stop is under
way is ignored, so the stop is not cut short half-way (SIGKILL still ends the launcher, and its
nodes follow it within a second: launcher/node_cli.py).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

HANDLED = (signal.SIGTERM, signal.SIGHUP)
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 1}
WHAT = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}


class Stopped(KeyboardInterrupt):
    """A stop signal other than Ctrl-C's, raised where KeyboardInterrupt would be."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_received: list[int] = []


def _raise_stopped(signum: int, _frame: FrameType | None) -> None:
    if _received:  # a stop is under way already
        return
    _received.append(signum)
    raise Stopped(signum)


@contextmanager
def installed() -> Iterator[None]:
    """SIGTERM and SIGHUP stop this process as Ctrl-C does, until the block ends (the CLI's
    entry point runs in it; a test calling that entry point gets its own handlers back)."""
    _received.clear()
    before = {signum: signal.signal(signum, _raise_stopped) for signum in HANDLED}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def received() -> int | None:
    """The signal that asked this launcher to stop (None: none did), so that a loop of runs
    (`--seeds`, a sweep) does not start the next one."""
    return _received[0] if _received else None


def signal_of(exc: KeyboardInterrupt) -> signal.Signals:
    return signal.Signals(exc.signum if isinstance(exc, Stopped) else signal.SIGINT)


def exit_code(signum: int) -> int:
    return EXIT_CODES.get(signal.Signals(signum), 128 + signum)


def describe(signum: int) -> str:
    """`terminated (SIGTERM)`: the head of the line a stopped run ends with."""
    sig = signal.Signals(signum)
    return f"{WHAT.get(sig, 'stopped')} ({sig.name})"
