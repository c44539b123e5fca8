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
