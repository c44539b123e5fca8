"""A node process's heap policy (dfl_node/runner/process_memory.py), on the C library it runs on."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dfl_node.runner.process_memory import LARGE_BUFFER_BYTES

# In a fresh interpreter: free a large buffer (which raises glibc's dynamic mmap threshold past
# its size), then allocate a buffer of that size again and report whether it got a mapping of
# its own (it is absent from the heap's range) - with the policy it must, without it it need not.
PROBE = """
import ctypes, sys
from dfl_node.runner.process_memory import release_large_buffers
if sys.argv[1] == "fixed":
    assert release_large_buffers()
size = 8 << 20
for _ in range(3):
    del_me = ctypes.create_string_buffer(size)
    del del_me
buf = ctypes.create_string_buffer(size)
address = ctypes.addressof(buf)
heap = [line.split()[0] for line in open("/proc/self/maps") if line.rstrip().endswith("[heap]")]
inside = any(int(lo, 16) <= address < int(hi, 16)
             for lo, hi in (span.split("-") for span in heap))
print("heap" if inside else "mapped")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_large_buffers_get_their_own_mapping_once_the_threshold_is_fixed() -> None:
    assert LARGE_BUFFER_BYTES < 8 << 20  # the probe's buffer is above the fixed threshold

    def where(mode: str) -> str:
        return subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True,
                              text=True, check=True).stdout.strip()

    assert where("fixed") == "mapped"
    assert where("dynamic") == "heap"  # glibc's default: the threshold grew past 8 MiB
