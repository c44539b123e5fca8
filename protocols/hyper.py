"""A protocol's `hyper:` block as a typed model that the protocol class declares.

Every protocol declares `Hyper`, a subclass of `ProtocolHyper`: its fields are the protocol's
settings, with their defaults (declared on the model and nowhere else) and their checks. The
launcher validates the user's `hyper` against it before any node starts (an unknown key is exit
2 with the closest known key), and the node reads the same model, typed, as `self.hyper`.
"""

from __future__ import annotations

from dfl_node.settings.runtime import RuntimeHyper


class ProtocolHyper(RuntimeHyper):
    """Base of every protocol's `Hyper`: the runtime keys (torch_threads, deterministic) plus
    the protocol's own fields."""

