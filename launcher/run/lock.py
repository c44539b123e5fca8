"""One launcher per run directory: an exclusive `flock` on RUN_DIR/run.lock while it works there.

Two launchers in one directory (a second `--resume`, a new run aimed at a running one) would
bind each other's ports, kill each other's nodes and interleave their files; the second is
refused instead, with the first one's pid, which the holder writes into the lock file once it
holds it. `flock` belongs to the open file, so the lock goes with the launcher however it ends
(SIGKILL included) and a stale lock file locks nothing; the node processes never hold it (the
zygote closes every inherited descriptor: launcher/backends/zygote.py).

The file stays after the run. Deleting it would let a launcher that opened it just before the
deletion lock the orphaned file while a third creates and locks a new one: two holders.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from launcher.errors import LaunchError
from launcher.run.directory import LOCK


def holder(path: Path) -> str:
    """The pid the holder wrote, as text ("unknown" before it has written it)."""
    try:
        text = path.read_text().strip()
    except OSError:
        text = ""
    return text if text.isdigit() else "unknown"


class RunLock:
    """The lock of one run directory, held from construction to `release` (or the `with`)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK
        self.fd: int | None = None
        self.unwritable: OSError | None = None  # why the lock file is open read-only
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as refused:
            # a read-only directory: a finished run there can still be looked at
            self.unwritable = refused
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:  # nor can another launcher have made it: none works here
                return
            except OSError as exc:
                raise LaunchError(f"{run_dir}: cannot use it as a run directory: "
                                  f"{exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LaunchError(f"{run_dir}: in use by another launcher (pid "
                              f"{holder(self.path)}, holding {self.path}); wait for it to "
                              "end or stop it") from None
        self.fd = fd

    def mark(self) -> None:
        """Write this launcher's pid into the lock file, for the message of one refused (not
        when it only looks: a finished run's files stay as they were); the OSError of a
        directory that takes no writes."""
        if self.unwritable is not None:
            raise self.unwritable
        assert self.fd is not None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the last descriptor of the open file unlocks it
            self.fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def lock_made(run_dir: Path, flag: str) -> RunLock:
    """`run_dir`, made if need be (a LaunchError naming `flag`, the option that gave it, when
    it cannot be), and locked for this launcher."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LaunchError(f"{flag} {run_dir}: cannot make it: {exc.strerror or exc}") from None
    return RunLock(run_dir)
