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

A handler runs wherever the interpreter next checks for signals, and some of those places
cannot pass an exception on. pyzmq's message frame checks for signals when it is freed, and an
exception raised in a deallocator is printed and dropped: a SIGTERM that arrived while the
collector freed a received frame printed a traceback and was lost, and the run went on for
good, the second SIGTERM being ignored as a stop under way. So, while the handlers are
installed, a stop that such a place drops (it reaches `sys.unraisablehook` or, through
`PyErr_Print`, `sys.excepthook`) is kept silently, and `raise_if_swallowed` raises it again
where the launcher next waits (launcher/run/collector.py's `pump`). Ctrl-C's KeyboardInterrupt
is kept the same way.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType

HANDLED = (signal.SIGTERM, signal.SIGHUP)
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 1}
WHAT = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}


class Stopped(KeyboardInterrupt):
    """A stop signal other than Ctrl-C's, raised where KeyboardInterrupt would be."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_received: list[int] = []
# The stop a deallocator or finalizer dropped, until `raise_if_swallowed` raises it again.
_swallowed: list[KeyboardInterrupt] = []


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
    _swallowed.clear()
    before = {signum: signal.signal(signum, _raise_stopped) for signum in HANDLED}
    unraisable_before, excepthook_before = sys.unraisablehook, sys.excepthook

    def unraisable(info: sys.UnraisableHookArgs) -> None:
        if not _keep_swallowed(info.exc_value):
            unraisable_before(info)

    def excepthook(kind: type[BaseException], value: BaseException,
                   traceback: TracebackType | None) -> None:
        if not _keep_swallowed(value):
            excepthook_before(kind, value, traceback)

    sys.unraisablehook, sys.excepthook = unraisable, excepthook
    try:
        yield
    finally:
        sys.unraisablehook, sys.excepthook = unraisable_before, excepthook_before
        _swallowed.clear()
        for signum, handler in before.items():
            signal.signal(signum, handler)


def _keep_swallowed(exc: BaseException | None) -> bool:
    """Keep a stop that a place which cannot raise dropped; False for any other exception,
    which the hook before ours reports as usual."""
    if not isinstance(exc, KeyboardInterrupt):
        return False
    if not _swallowed:  # pyzmq reports one drop to both hooks: keep it once
        _swallowed.append(exc)
    return True


def raise_if_swallowed() -> None:
    """Raise the stop a deallocator dropped, if one did (only the main thread, where signal
    handlers run, is stopped this way; a thread that waits with the launcher carries on)."""
    if _swallowed and threading.current_thread() is threading.main_thread():
        raise _swallowed.pop().with_traceback(None)


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
