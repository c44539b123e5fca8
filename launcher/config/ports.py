"""Free TCP ports for local runs that no concurrent run can take.

Two hazards make "bind port 0, note it, close it" unsafe for a mesh whose nodes bind later:
another dfl-launch may pick the same port in the meantime, and any outgoing connection (our own
DEALERs included) may be handed it as an ephemeral source port. So ports are drawn below the
kernel's ephemeral range, and each one is claimed by an exclusive lock file that this launcher
holds until the run ends; concurrent launchers skip claimed ports.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import random
import socket
import tempfile
from pathlib import Path
from typing import IO

from launcher.errors import LaunchError

PORT_FLOOR = 20000
LOCK_DIR = Path(tempfile.gettempdir()) / "dfl-mesh-ports"


def ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(port: int, host: str) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


class PortClaims:
    """Ports claimed for one run; the claims last until `release()` (or the process ends)."""

    def __init__(self) -> None:
        self._locks: list[IO[bytes]] = []
        self.ports: list[int] = []

    @staticmethod
    def capacity() -> int:
        """How many ports the range holds at most (others may hold some of them)."""
        return max(ephemeral_floor() - PORT_FLOOR, 0)

    def claim(self, count: int, host: str = "127.0.0.1") -> list[int]:
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        # From a random point of the range on (a shuffle of all of it cost 20 ms a claim):
        # concurrent launchers rarely start at the same place, and the locks settle it if so.
        candidates = range(PORT_FLOOR, ephemeral_floor())
        start = random.Random(os.getpid() ^ id(self)).randrange(len(candidates))
        got: list[int] = []
        for port in itertools.chain(candidates[start:], candidates[:start]):
            if len(got) == count:
                break
            if port not in self.ports and self._lock(port) and bindable(port, host):
                got.append(port)
        if len(got) < count:
            raise LaunchError(f"ports: only {len(got)} of the {count} local ports this run "
                              f"needs are free in {PORT_FLOOR}..{ephemeral_floor() - 1}")
        self.ports += got
        return got

    def _lock(self, port: int) -> bool:
        handle = (LOCK_DIR / f"{port}.lock").open("ab")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._locks.append(handle)
        return True

    def release(self) -> None:
        for handle in self._locks:
            handle.close()
        self._locks.clear()
