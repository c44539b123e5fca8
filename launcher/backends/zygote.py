"""The processes backend's node factory: a fork of the launcher that forks every node.

A node needs what the launcher has already imported: torch, the runtime, the protocols. A fresh
interpreter (multiprocessing's forkserver, which this replaces) imports it all again, a second
`import torch` of seconds on the way from the command to round 1, and keeps a second private copy
of what that import allocates (about 290 MB for torch's CUDA build). A fork of the launcher
needs neither: the zygote and, through it, every node share the launcher's pages until they
write to them.

The launcher forks it first thing in a launch, before it has a thread (the progress display's,
the collector's ZeroMQ threads) and before it may have touched CUDA (resolving `auto` devices
counts GPUs): a fork copies only the calling thread, and with it any lock another thread held,
and a CUDA driver started before a fork fails in the child. Nodes are forked from the zygote,
never from the launcher, which by then runs those threads. The zygote warms torch up
(launcher/backends/preload.py) while the launcher resolves the plan, then forks a node per
request.

The two talk over a socket pair, one JSON message per packet: the launcher sends
`{"warm_up": "full"|"forward", "plan": path}` once, then `{"start": [arguments]}` per node,
answered with `{"pid": P}`; when a node exits the zygote reaps it and sends
`{"exit": [P, code]}` (code as multiprocessing gives it: the exit status, or minus the signal
that killed it). The zygote ends when the launcher closes its end; nodes still running watch
the launcher themselves (launcher/node_cli.py).

A zygote that dies mid-run (killed, out of memory) leaves its nodes running as orphans, no
longer anyone's children: the launcher learns it from the socket's end (`lost`, with the
zygote's own exit code) and can then only signal them by pid, checked against each node's
start time so that a reused pid is never hit (launcher/process_table.py).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import selectors
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from dfl_config.errors import DflMeshError
from launcher import process_table
from launcher.backends import preload

# The exit code of a node whose zygote died before reporting it (multiprocessing's, likewise).
LOST = 255
PACKET_BYTES = 1 << 16

Target = Callable[..., None]
ORPHAN_POLL_S = 0.05  # how often a wait for an orphaned node looks again


class ZygoteLost(RuntimeError, DflMeshError):
    """The zygote died: it forks no more nodes and reports no more exits."""


class Zygote:
    """The launcher's end: fork the zygote now; start nodes and learn their exit codes later."""

    def __init__(self, target: Target) -> None:
        """Fork the zygote, which will run `target(*arguments)` in each node it forks."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for stream in (sys.stdout, sys.stderr):  # or the child would write it out again
            stream.flush()
        # Out of this process's garbage collections, which would otherwise write to every
        # object's header and so copy (in this process) each page it shares with the nodes.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            ours.close()
            _zygote_main(theirs, target)
        theirs.close()
        self.pid = pid
        self._sock: socket.socket | None = ours
        self.exits: dict[int, int] = {}
        self.lost = False  # the zygote died: exits it did not report will never come
        self.lost_code = 0  # its exit code then, as `exits` gives a node's

    def warm_up(self, backward: bool, plan_path: Path | None = None) -> None:
        """Finish the warm-up: with the backward pass only if no node will use a GPU, and with
        the data every node of the plan at `plan_path` shares. A zygote gone already is not
        an error here: starting the nodes says so."""
        with contextlib.suppress(ZygoteLost):
            self._send({"warm_up": "full" if backward else "forward",
                        "plan": None if plan_path is None else str(plan_path)})

    def start(self, calls: Sequence[Sequence[Any]]) -> Iterator[NodeProcess]:
        """Fork a node running `target(*arguments)` for each `arguments` (JSON values) of
        `calls`, in order. Every request is sent at once, so the zygote forks one node after
        the other without waiting for this process; the nodes are yielded as their pids come
        back (the caller may do other work in between)."""
        for arguments in calls:
            self._send({"start": list(arguments)})
        for _ in calls:
            while True:
                message = self._receive(None)
                if message is None:
                    raise ZygoteLost(f"the zygote (pid {self.pid}) ended before it started "
                                     "every node")
                if "pid" in message:
                    yield NodeProcess(self, int(message["pid"]))
                    break

    def poll(self, timeout: float | None = 0.0) -> None:
        """Take the exit reports that arrive within `timeout` seconds (None: wait for one)."""
        message = self._receive(timeout)
        while message is not None:
            message = self._receive(0.0)

    def wait(self, pid: int, timeout: float | None) -> int | None:
        """`pid`'s exit code once reported within `timeout` seconds, else None."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while pid not in self.exits and not self.lost:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            self.poll(left)
        return self.exits.get(pid)

    def close(self) -> None:
        """End the zygote (not its nodes: stop those first)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            os.kill(self.pid, signal.SIGKILL)  # it may be mid-warm-up; nothing of it is kept
            os.waitpid(self.pid, 0)
        gc.unfreeze()  # nothing shares this process's pages any more (a later run freezes again)

    def _send(self, message: dict[str, Any]) -> None:
        if self._sock is None:
            raise ZygoteLost("the zygote is gone") if self.lost else RuntimeError(
                "the zygote is closed")
        try:
            self._sock.send(json.dumps(message).encode())
        except OSError:  # its end closed: it died
            self._lose()
            raise ZygoteLost(f"the zygote (pid {self.pid}) is gone") from None

    def _lose(self) -> None:
        """The zygote's end of the socket closed: reap it; its unreported nodes are orphans."""
        assert self._sock is not None
        self._sock.close()
        self._sock = None
        _, status = os.waitpid(self.pid, 0)
        self.lost_code = os.waitstatus_to_exitcode(status)
        self.lost = True

    def _receive(self, timeout: float | None) -> dict[str, Any] | None:
        """One message (exit reports are recorded on the way), or None on timeout or once the
        zygote is gone (every node it has not reported is then LOST)."""
        if self._sock is None:
            return None
        poller = select.poll()  # not select(): the launcher may hold over 1024 descriptors
        poller.register(self._sock, select.POLLIN)
        if not poller.poll(None if timeout is None else max(0, round(timeout * 1000))):
            return None
        try:
            raw = self._sock.recv(PACKET_BYTES)
        except ConnectionResetError:
            raw = b""
        if not raw:
            self._lose()
            return None
        message: dict[str, Any] = json.loads(raw)
        if "exit" in message:
            pid, code = message["exit"]
            self.exits[int(pid)] = int(code)
        return message


class NodeProcess:
    """A node forked by the zygote, with the part of multiprocessing.Process the backend uses."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.started = process_table.start_time(pid)

    @property
    def exitcode(self) -> int | None:
        self.zygote.poll()
        if self.pid not in self.zygote.exits and self.zygote.lost:
            return LOST
        return self.zygote.exits.get(self.pid)

    @property
    def alive(self) -> bool:
        """Whether the node still runs: no exit reported, or an orphan that runs on."""
        return self.exitcode is None or self.orphaned()

    def orphaned(self) -> bool:
        """Whether this node still runs although its zygote died (so no exit will be
        reported for it)."""
        return (self.zygote.lost and self.pid not in self.zygote.exits
                and process_table.running(self.pid, self.started))

    def join(self, timeout: float | None = None) -> None:
        if not self.zygote.lost:
            self.zygote.wait(self.pid, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.orphaned() and (deadline is None or time.monotonic() < deadline):
            time.sleep(ORPHAN_POLL_S)  # not our child: nothing to wait on but its /proc entry

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self.alive:  # its pid is still this node's: not reaped, or an orphan running on
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)


# --- the zygote's side -----------------------------------------------------------------------

def _zygote_main(sock: socket.socket, target: Target) -> NoReturn:
    code = 1
    try:
        _keep_only(sock.fileno())
        serve(sock, target)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def _keep_only(fd: int) -> None:
    """Close every inherited descriptor but stdio and `fd`, and read stdin from /dev/null:
    nodes live as long as the run, and must not hold a pipe or lock of the launcher's open."""
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def serve(sock: socket.socket, target: Target) -> None:
    """The zygote: warm up, then fork a node per request and report its exit, until the
    launcher hangs up."""
    # Ctrl-C and a hang-up reach the whole process group, and are the launcher's to handle: it
    # stops the nodes in order. SIGTERM kills (the launcher's handler of it, inherited by the
    # fork, would turn the launcher's stop of a node into a traceback in its log).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    preload.one_blas_thread()
    preload.warm_forward()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that SIGCHLD wakes the loop
    children: set[int] = set()
    frozen = False
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        selector.register(wake_r, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fd == wake_r:
                    os.read(wake_r, 4096)
                    _reap(sock, children)
                    continue
                message = _read(sock)
                if message is None:
                    return
                if "warm_up" in message:
                    _finish_warm_up(message)
                    continue
                if not frozen:
                    preload.freeze()
                    frozen = True
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    selector.close()
                    for fd in (sock.fileno(), wake_r, wake_w):
                        os.close(fd)
                    node_main(target, message["start"])
                children.add(pid)
                try:
                    sock.send(json.dumps({"pid": pid}).encode())
                except OSError:  # the launcher is gone (stopped mid-start): as a hang-up; the
                    return  # node sees its launcher gone and ends itself (launcher/node_cli.py)


def _finish_warm_up(message: dict[str, Any]) -> None:
    if message["warm_up"] == "full":
        preload.warm_backward()
    if message.get("plan"):
        preload.warm_data(Path(message["plan"]))


def _read(sock: socket.socket) -> dict[str, Any] | None:
    """The launcher's next request; None once it has hung up (or its end was reset)."""
    try:
        raw = sock.recv(PACKET_BYTES)
    except ConnectionResetError:
        return None
    return json.loads(raw) if raw else None


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        children.discard(pid)
        try:
            sock.send(json.dumps({"exit": [pid, os.waitstatus_to_exitcode(status)]}).encode())
        except OSError:  # the launcher is gone
            return


def node_main(target: Target, arguments: list[Any]) -> NoReturn:
    """A node: the target's exit status as multiprocessing would give it (0; 1 and the
    traceback on stderr after an exception; a SystemExit's code)."""
    code = 1
    try:
        target(*arguments)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
