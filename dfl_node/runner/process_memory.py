"""A node process's heap policy: one malloc arena for all of its threads, a round's large buffers
in it (fixed thresholds), and its free pages handed back around an evaluation.

glibc gives each thread that allocates its own arena (up to 8 per core), and an arena keeps the
space freed in it for its own later use. A node has two threads that allocate a model's worth of
bytes every round: the main one (decoded tensors, mixing sums) and libzmq's I/O thread (every
received message's buffer). Each arena therefore settles at its own peak, and a dmflsq-cnn node
on ring20 held 98 MB PSS; with one arena the same buffers take turns in the same space and it
holds 84 MB, at no cost in round time (30.6 against 32.7 ms of CPU per node-round).

Returning freed large buffers to the system instead (a fixed mmap threshold) took the same node
to 60 MB, but then every round's 6.5 MB buffers are fresh pages again: 22 % more CPU per round.

What glibc keeps between rounds is reused the next round; an evaluation, though, allocates
buffers of its own (a pass of 64 images through `dmflsq-cnn` holds 19 MB of activations) on top
of the 20 to 30 MB the heap holds free after a round, and it is where a CNN node's PSS peaks
over a run. `release_free_heap` before it and after it hands the free pages back: once per
evaluation, so the pages refaulted after it cost the rounds nothing that counts.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

M_ARENA_MAX = -8  # glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
ARENAS = 1
# Buffers up to this size come from the heap (glibc's largest setting); the heap's top is kept
# up to KEPT_TOP bytes free: a model's buffers are the same every round.
HEAP_BUFFERS_MAX = 32 << 20
KEPT_TOP = 256 << 20


def glibc_function(name: str, *argtypes: type) -> Any | None:
    """The C library's `name` taking `argtypes` and returning an int, or None where it has none
    (not Linux: macOS's libc has neither mallopt nor malloc_trim)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = list(argtypes)
    function.restype = ctypes.c_int
    return function


def share_one_arena() -> bool:
    """Give every thread this process starts from now on the main arena, and keep a round's
    large buffers in it; False where the C library has no mallopt (macOS) or refuses it. Call
    it early in a node process, before it starts threads (ZeroMQ's, the liveness watch).

    glibc's own thresholds move: a freed mmap'd buffer raises the size above which buffers are
    mmap'd to its own, so a buffer a little larger than any freed so far (a received tensor's
    copy at its offset, a few bytes over the frame it came in) is fresh pages, 5 ms per 6.5 MB
    here; and the heap's top is handed back once twice that much is free, to be faulted in
    again the next round. Fixed, every buffer of a round is one the heap held before."""
    mallopt = glibc_function("mallopt", ctypes.c_int, ctypes.c_int)
    return mallopt is not None and all(mallopt(option, value) for option, value in (
        (M_ARENA_MAX, ARENAS), (M_MMAP_THRESHOLD, HEAP_BUFFERS_MAX),
        (M_TRIM_THRESHOLD, KEPT_TOP)))


def release_free_heap() -> bool:
    """Hand every whole free page of the heap back to the system (glibc's `malloc_trim(0)`,
    which also releases free pages inside the heap, not only at its top); whether any was.
    False where the C library has no malloc_trim."""
    trim = glibc_function("malloc_trim", ctypes.c_size_t)
    return trim is not None and bool(trim(0))
