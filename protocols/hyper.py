"""A protocol's `hyper:` block as a typed model that the protocol's spec declares.

Every protocol declares `Hyper`, a subclass of `ProtocolHyper`: its fields are the protocol's
settings, with their defaults (declared on the model and nowhere else) and their checks. The
launcher validates the user's `hyper` against it before any node starts (an unknown key is exit
2 with the closest known key), and the node reads the same model, typed, as `self.hyper`. The
models a protocol's `Hyper` is made of live here, without torch, because the launcher reads
them (protocols/spec.py).
"""

from __future__ import annotations

from dfl_config.section import Count, NonNegativeInt, Positive, Section
from dfl_node.settings.runtime import RuntimeHyper

B_FP = 32  # bits of a float32 value on the wire


class ProtocolHyper(RuntimeHyper):
    """Base of every protocol's `Hyper`: the runtime keys (torch_threads, deterministic) plus
    the protocol's own fields."""


class TrainingHyper(ProtocolHyper):
    """The settings of plain mini-batch SGD (protocols/sdk/learning.py's LocalSGD)."""

    lr: Positive = 0.1
    """Step size."""
    batch_size: Count = 32
    """Mini-batch size (capped at the shard's size)."""


class DenseAccounting(Section):
    """Formula constants of a dense float message (docs/protocols/dmfl-sq.md#a17)."""

    b_fp: NonNegativeInt = B_FP
    """Bits per value."""
    b_hdr: NonNegativeInt = 0
    """Header bits per message (0: omitted, as the q-FFL formula does)."""
