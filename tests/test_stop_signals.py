"""A stop signal is never lost where the interpreter cannot raise it (launcher/stop_signals.py).

pyzmq's message frame checks for signals as it is freed, and an exception raised there is
printed and dropped. A SIGTERM that arrived while the collector freed a frame once left a run
going for good (the slow suite's SIGTERM test hung). These tests put the signal exactly there,
with no timing involved: a weak reference's callback, C code with no Python frame, sends the
signal while a list is freed, and the real pyzmq frame is the next item the list frees, so the
handler runs inside the frame's deallocator."""

from __future__ import annotations

import ctypes
import queue
import signal
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from launcher import stop_signals
from launcher.run.collector import Collector, QueueSource


class _Anchor:
    """An object to hang the weak reference on."""


def _signal_while_a_frame_is_freed(signum: int) -> None:
    class Signum:  # ctypes converts the weak reference the callback gets into `signum`
        @classmethod
        def from_param(cls, _ref: object) -> int:
            return signum

    send = ctypes.CDLL(None)["raise"]
    send.argtypes = [Signum]
    anchor = _Anchor()
    ref = weakref.ref(anchor, send)
    # A list frees its items last to first: `anchor` first (its callback sends the signal,
    # which C code does not handle), then the frame, whose deallocator runs the handler.
    held = [zmq.Frame(b"record"), anchor]
    del anchor
    del held
    assert ref() is None


@pytest.fixture
def installed() -> Iterator[None]:
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as run_cli sets it
    try:
        with stop_signals.installed():
            yield
    finally:
        signal.signal(signal.SIGINT, before)


def _collector(tmp_path: Path) -> Collector:
    return Collector(QueueSource(queue.Queue()), tmp_path, [0])


def test_a_sigterm_dropped_by_a_freed_frame_is_raised_at_the_collectors_next_pump(
        installed: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    collector = _collector(tmp_path)
    _signal_while_a_frame_is_freed(signal.SIGTERM)
    assert stop_signals.received() == signal.SIGTERM  # the handler ran, in the deallocator
    assert capfd.readouterr().err == ""  # no traceback of the drop
    with pytest.raises(stop_signals.Stopped) as stopped:
        collector.pump(0.0)
    assert stopped.value.signum == signal.SIGTERM
    assert collector.pump(0.0) is False  # raised once, not at every pump after


def test_a_ctrl_c_dropped_by_a_freed_frame_is_raised_at_the_collectors_next_pump(
        installed: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    collector = _collector(tmp_path)
    _signal_while_a_frame_is_freed(signal.SIGINT)
    assert capfd.readouterr().err == ""
    with pytest.raises(KeyboardInterrupt) as stopped:
        collector.pump(0.0)
    assert not isinstance(stopped.value, stop_signals.Stopped)


def test_other_dropped_exceptions_still_reach_the_hook_before(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[BaseException | None] = []

    def hook(info: sys.UnraisableHookArgs) -> None:
        seen.append(info.exc_value)

    monkeypatch.setattr(sys, "unraisablehook", hook)

    class Failing:
        def __del__(self) -> None:
            raise ValueError("a finalizer's own failure")

    with stop_signals.installed():
        Failing()
        _collector(tmp_path).pump(0.0)  # nothing to raise again
    assert [type(exc) for exc in seen] == [ValueError]
    assert sys.unraisablehook is hook  # ours is gone once the block ends


def test_without_the_handlers_nothing_is_kept(tmp_path: Path) -> None:
    """A program that did not install them (a notebook, `dfl_mesh.run`) keeps its own hooks."""
    hooks = (sys.unraisablehook, sys.excepthook)
    with stop_signals.installed():
        assert (sys.unraisablehook, sys.excepthook) != hooks
    assert (sys.unraisablehook, sys.excepthook) == hooks
    assert _collector(tmp_path).pump(0.0) is False
