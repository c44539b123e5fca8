"""A node process's heap policy: buffers of a mebibyte and more go back to the system when freed.

glibc serves an allocation of at least M_MMAP_THRESHOLD bytes from a mapping of its own and
unmaps it on free, but by default it raises that threshold (up to 32 MiB) every time such a
mapping is freed. After a node's first rounds its large buffers (a CNN's 6.5 MB messages as
libzmq's I/O thread receives them, the decoded tensors, the mixing sums) therefore come from the
main heap and the I/O thread's arena instead, where freed space stays with the process and only
grows: a dmflsq-cnn node on ring20 held 109 MB PSS where its live tensors need about half
(59 MB with the threshold fixed). A fixed 1 MiB keeps small messages (the MLP's are about
200 kB) on the heap's fast path, where reuse costs no page faults.
"""

from __future__ import annotations

import ctypes
import sys

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
LARGE_BUFFER_BYTES = 1 << 20


def release_large_buffers() -> bool:
    """Fix glibc's mmap threshold for this process; False where the C library has no mallopt
    (macOS) or refuses it. Call it once, early in a node process; it only affects allocations
    made after it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, LARGE_BUFFER_BYTES))
