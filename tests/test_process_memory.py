"""A node process's heap policy (dfl_node/runner/process_memory.py), on the C library it runs on."""

from __future__ import annotations

import subprocess
import sys

import pytest

# In a fresh interpreter: a thread allocates a buffer below glibc's mmap threshold and reports
# whether it came from the main heap ("[heap]" in the memory map) or from an arena of its own.
PROBE = """
import ctypes, sys, threading
from dfl_node.runner.process_memory import share_one_arena
if sys.argv[1] == "shared":
    assert share_one_arena()
found = []
def allocate():
    buf = ctypes.create_string_buffer(64 << 10)
    found.append(ctypes.addressof(buf))
thread = threading.Thread(target=allocate)
thread.start()
thread.join()
heap = [line.split()[0] for line in open("/proc/self/maps") if line.rstrip().endswith("[heap]")]
inside = any(int(lo, 16) <= found[0] < int(hi, 16)
             for lo, hi in (span.split("-") for span in heap))
print("heap" if inside else "own arena")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_nodes_threads_allocate_from_the_one_main_arena() -> None:
    def where(mode: str) -> str:
        return subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True,
                              text=True, check=True).stdout.strip()

    assert where("shared") == "heap"
    assert where("default") == "own arena"  # glibc's default: an arena per thread


# In a fresh interpreter: 16 MB of heap buffers freed below one still held (so glibc cannot just
# lower the heap's top), then the resident kB of "[heap]" before and after release_free_heap.
TRIM_PROBE = """
import ctypes
from dfl_node.runner.process_memory import release_free_heap
def heap_kb():
    kb, inside = 0, False
    for line in open("/proc/self/smaps"):
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            inside = line.rstrip().endswith("[heap]")
        elif inside and head == "Rss:":
            kb += int(line.split()[1])
    return kb
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
buffers = [libc.malloc(64 << 10) for _ in range(256)]
for b in buffers:
    ctypes.memset(b, 1, 64 << 10)
held = libc.malloc(64 << 10)
for b in buffers:
    libc.free(b)
before = heap_kb()
released = release_free_heap()
print(released, before - heap_kb())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_released_free_heap_pages_leave_the_process() -> None:
    out = subprocess.run([sys.executable, "-c", TRIM_PROBE], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == "True"
    assert int(out[1]) >= 12 << 10  # of the 16 MB freed, in kB (free chunks keep a header page)
