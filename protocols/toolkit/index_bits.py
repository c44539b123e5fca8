"""The bits of one index into P coordinates, apart from the position codes that use it
(positions.py, numpy): a protocol's message accounting, part of its declaration, charges it,
and the launcher reads every declaration before it checks a request (issue 45)."""

from __future__ import annotations


def ceil_log2(size: int) -> int:
    """ceil(log2 size) for size >= 1, exactly (no floating point): the bits of one index."""
    if size < 1:
        raise ValueError(f"ceil_log2 needs size >= 1, got {size}")
    return (int(size) - 1).bit_length()
