"""Named random streams.

Every random draw in a run comes from a stream derived from (global seed, node id, stream name),
so a node's randomness does not depend on which process, thread or host it runs in, nor on how
many other streams were consumed before it. That is what lets the zmq and inproc transports give
bit-identical results.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import torch


def stream_seed(seed: int, node: int, name: str) -> int:
    """A 63-bit seed that is a pure function of its three inputs."""
    digest = hashlib.sha256(f"{seed}/{node}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def numpy_stream(seed: int, node: int, name: str) -> np.random.Generator:
    """numpy imported here, not above: a protocol's declaration names this stream (through
    protocols.sdk), and the launcher's refusal of bad input, which reads every declaration,
    needs no numpy."""
    import numpy as np

    return np.random.default_rng(stream_seed(seed, node, name))


def torch_stream(seed: int, node: int, name: str) -> torch.Generator:
    """torch imported here, not above: the launcher partitions data with the numpy streams and
    imports no torch (a `dfl-launch slurm --submit` none at all)."""
    import torch

    gen = torch.Generator()
    gen.manual_seed(stream_seed(seed, node, name))
    return gen
