"""A node process's heap policy: one malloc arena for all of its threads.

glibc gives each thread that allocates its own arena (up to 8 per core), and an arena keeps the
space freed in it for its own later use. A node has two threads that allocate a model's worth of
bytes every round: the main one (decoded tensors, mixing sums) and libzmq's I/O thread (every
received message's buffer). Each arena therefore settles at its own peak, and a dmflsq-cnn node
on ring20 held 98 MB PSS; with one arena the same buffers take turns in the same space and it
holds 84 MB, at no cost in round time (30.6 against 32.7 ms of CPU per node-round).

Returning freed large buffers to the system instead (a fixed mmap threshold) took the same node
to 60 MB, but then every round's 6.5 MB buffers are fresh pages again: 22 % more CPU per round.
"""

from __future__ import annotations

import ctypes
import sys

M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)
ARENAS = 1


def share_one_arena() -> bool:
    """Give every thread this process starts from now on the main arena; False where the C
    library has no mallopt (macOS) or refuses it. Call it early in a node process, before it
    starts threads (ZeroMQ's, the liveness watch)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, ARENAS))
