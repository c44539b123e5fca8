"""Where received tensors live: in ZeroMQ's own frame when it can, else in a copy at its offset.

Why a fixed address offset: the protocol's results must not depend on the transport, and BLAS
kernels round by alignment (a float32 dot product over the same numbers gives another result
at another offset, tests/test_comm.py). So every received tensor sits at one offset from a
64-byte boundary, whatever transport delivered it:
- a tensor under LARGE_BYTES is copied into fresh torch memory (offset 0; the copy is cheap);
- a larger one sits at RECEIVED_OFFSET = 56. That is where libzmq 4 puts the data of a large
  frame allocated by glibc (a 16-byte chunk header, then its 40-byte message header), so a
  frame from ZeroMQ (nearly always for frames over glibc's 32 MiB mmap limit, about half the
  time for smaller ones) becomes the protocol's tensor in place: no copy on receive. Any
  other frame (a read-only one from the in-process transport, one at another address) is
  copied once into fresh memory at that offset, and the frame is let go once admitted.

Why no pool of copies: the heap already recycles. A copy's buffer comes from glibc's heap, where
the buffers of last round's received tensors and frames lie free (a node's threads share one
arena, dfl_node/runner/process_memory.py), so it costs no fresh pages; a pool that kept
dropped copies for the next round (as this module once did) held them also in the rounds whose
frames came in place, and a dmflsq-cnn node on ring20 with it peaked at 88 MB PSS against 79
without (largest node, bench/startup.py's memory run).

The price of offset 56 is that large received tensors are 8 bytes off a 16-byte boundary, where
OpenBLAS's float32 dot product takes a slower path (measured: 3.7x slower for 10M elements);
elementwise arithmetic, which is what averaging does, runs at the same speed (measured at
offsets 0 and 56: add and norm within 3%, sum 11% slower). Received tensors are the protocol's
own: writable, and no other party reads or writes their memory (ZeroMQ hands a received
frame's buffer to its receiver alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from dfl_node.wire.codec import Frame

LARGE_BYTES = 1 << 20  # received tensors this large sit at RECEIVED_OFFSET, in place if they can
RECEIVED_OFFSET = 56  # bytes past a 64-byte boundary: where libzmq's large frames begin
ALIGNMENT = 64

TORCH_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}
# keyed by numpy dtype: `array.dtype.name` is Python code in numpy, several microseconds per
# call, and every received tensor needs its torch dtype
_TORCH_OF = {np.dtype(name): dtype for name, dtype in TORCH_DTYPES.items()}


def offset_of(address: int) -> int:
    """The bytes by which an address lies past a 64-byte boundary."""
    return address % ALIGNMENT


class ReceivedTensors:
    """Turns a decoded message's checked views into the protocol's tensors, and counts the
    bytes taken in place and the bytes copied (the figure the transport bench reports)."""

    def __init__(self) -> None:
        self.in_place_bytes = 0
        self.copied_bytes = 0

    def tensors(self, arrays: Mapping[str, np.ndarray],
                frames: Sequence[Frame]) -> dict[str, torch.Tensor]:
        """One tensor per decoded array; `frames` are the message's tensor frames, in order."""
        return {name: self.tensor(array, frame)
                for (name, array), frame in zip(arrays.items(), frames, strict=True)}

    def tensor(self, array: np.ndarray, frame: Frame) -> torch.Tensor:
        """`array` (a checked, read-only view of `frame`) as a writable tensor of the protocol's,
        at the offset every transport gives a tensor of its size."""
        if array.nbytes < LARGE_BYTES:
            self.copied_bytes += array.nbytes
            dtype = _TORCH_OF.get(array.dtype) or TORCH_DTYPES[array.dtype.name]  # non-native order
            tensor = torch.empty(array.shape, dtype=dtype)
            np.copyto(tensor.numpy(), array)
            return tensor
        in_place = _in_place(array, frame)
        if in_place is not None:
            self.in_place_bytes += array.nbytes
            return torch.from_numpy(in_place)
        self.copied_bytes += array.nbytes
        return torch.from_numpy(copy_at_offset(array))


def _in_place(array: np.ndarray, frame: Frame) -> np.ndarray | None:
    """A writable array over the frame itself, when the frame is writable memory at the
    received offset and holds native-order values; None when the tensor must be copied."""
    view = memoryview(frame)
    if view.readonly or not array.dtype.isnative:
        return None
    if offset_of(array.__array_interface__["data"][0]) != RECEIVED_OFFSET:
        return None
    return np.frombuffer(view.cast("B"), dtype=array.dtype).reshape(array.shape)


def copy_at_offset(array: np.ndarray) -> np.ndarray:
    """A writable copy of `array` whose data starts RECEIVED_OFFSET bytes past a 64-byte
    boundary (in torch memory, which starts on one; the view keeps it alive)."""
    raw = torch.empty(array.nbytes + ALIGNMENT, dtype=torch.uint8).numpy()
    start = (RECEIVED_OFFSET - offset_of(raw.ctypes.data)) % ALIGNMENT
    owned = raw[start : start + array.nbytes].view(np.dtype(array.dtype.name)).reshape(array.shape)
    np.copyto(owned, array)
    return owned
