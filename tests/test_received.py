"""Where received tensors live: in place when the frame allows it, else one copy at the offset."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dfl_node.comm.received import (
    LARGE_BYTES,
    RECEIVED_OFFSET,
    ReceivedTensors,
    copy_at_offset,
    offset_of,
)
from dfl_node.wire.codec import WireLimits, decode, encode
from dfl_node.wire.tags import Tag

NUMEL = LARGE_BYTES // 4 * 2  # float32: twice the size from which tensors sit at the offset
LIMITS = WireLimits(max_tensors=2, max_message_bytes=8 * NUMEL)
VALUES = np.arange(NUMEL, dtype=np.float32)


def frame_at(offset: int, data: np.ndarray) -> memoryview:
    """A writable frame holding `data`'s bytes, `offset` bytes past a 64-byte boundary."""
    raw = torch.empty(data.nbytes + 128, dtype=torch.uint8).numpy()
    start = (offset - offset_of(raw.ctypes.data)) % 64
    window = raw[start : start + data.nbytes]
    window[:] = data.view(np.uint8)
    return memoryview(window)


def receive(tensor_frame: memoryview | bytes, received: ReceivedTensors) -> torch.Tensor:
    """Decode a message whose tensor frame is `tensor_frame`, as Comm does, and take it."""
    header = encode(0, Tag("data", 0, "p"), {"w": VALUES})[0]
    message = decode([header, tensor_frame], LIMITS)
    return received.tensors(message.tensors, [tensor_frame])["w"]


def test_a_writable_frame_at_the_offset_becomes_the_tensor_without_a_copy() -> None:
    frame = frame_at(RECEIVED_OFFSET, VALUES)
    received = ReceivedTensors()
    tensor = receive(frame, received)
    address = np.frombuffer(frame, dtype=np.uint8).ctypes.data
    assert tensor.data_ptr() == address and torch.equal(tensor, torch.from_numpy(VALUES))
    tensor[0] = -1.0  # writable, and the frame's own memory
    assert np.frombuffer(frame, dtype=np.float32)[0] == -1.0
    assert (received.in_place_bytes, received.copied_bytes) == (VALUES.nbytes, 0)


@pytest.mark.parametrize("frame", [
    pytest.param(frame_at(0, VALUES), id="writable, at another offset"),
    pytest.param(frame_at(RECEIVED_OFFSET, VALUES).toreadonly(), id="read-only, at the offset"),
    pytest.param(VALUES.tobytes(), id="bytes, as the in-process transport delivers"),
])
def test_any_other_large_frame_is_copied_once_to_the_offset(frame: memoryview | bytes) -> None:
    received = ReceivedTensors()
    tensor = receive(frame, received)
    assert offset_of(tensor.data_ptr()) == RECEIVED_OFFSET
    assert tensor.data_ptr() != np.frombuffer(frame, dtype=np.uint8).ctypes.data
    assert torch.equal(tensor, torch.from_numpy(VALUES))
    tensor[0] = -1.0
    assert np.frombuffer(frame, dtype=np.float32)[0] == 0.0  # the frame is untouched
    assert (received.in_place_bytes, received.copied_bytes) == (0, VALUES.nbytes)


def test_small_tensors_are_copied_into_torch_memory() -> None:
    small = np.arange(100, dtype=np.int64)
    frame = frame_at(RECEIVED_OFFSET, small)
    header = encode(0, Tag("data", 0, "p"), {"w": small})[0]
    message = decode([header, frame], LIMITS)
    received = ReceivedTensors()
    tensor = received.tensors(message.tensors, [frame])["w"]
    assert offset_of(tensor.data_ptr()) == 0 and tensor.dtype == torch.int64
    assert torch.equal(tensor, torch.from_numpy(small))
    assert received.copied_bytes == small.nbytes


def misaligned_copy(tensor: torch.Tensor, offset: int) -> torch.Tensor:
    """The same float32 values at `offset` bytes past a 64-byte boundary."""
    raw = torch.empty(tensor.numel() * 4 + 64, dtype=torch.uint8)
    view = raw[offset : offset + tensor.numel() * 4].view(torch.float32).view(tensor.shape)
    view.copy_(tensor)
    return view


def test_blas_rounds_by_alignment_which_is_why_every_transport_uses_one_offset() -> None:
    """The premise of RECEIVED_OFFSET: a dot product over the same float32 values gives another
    result at another alignment (BLAS peels to aligned blocks), so received tensors must sit
    at the same offset under every transport. Skipped where the BLAS does not round so."""
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(4097, generator=generator), torch.randn(4097, generator=generator)
    differs = [offset for offset in (8, 24, 40, 56) if not torch.equal(
        misaligned_copy(x, offset) @ y, x @ y)]
    if not differs:
        pytest.skip("this BLAS gives the same dot product at every alignment")
    assert offset_of(x.data_ptr()) == 0 and RECEIVED_OFFSET in differs
    same = misaligned_copy(x, RECEIVED_OFFSET)
    assert torch.equal(same @ y, misaligned_copy(x, RECEIVED_OFFSET) @ y)


def test_every_copy_is_memory_of_its_own() -> None:
    """A copy is never memory that backs another live tensor, also once the protocol dropped
    an earlier one (the heap may hand that memory out again: then only to this copy)."""
    first = torch.from_numpy(copy_at_offset(VALUES))
    view = first[7:]
    del first
    second = torch.from_numpy(copy_at_offset(VALUES))
    assert second.data_ptr() != view.data_ptr() - 7 * 4
    assert offset_of(second.data_ptr()) == RECEIVED_OFFSET
    assert torch.equal(second, torch.from_numpy(VALUES)) and torch.equal(view, second[7:])
