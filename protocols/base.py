"""The old module of the protocol node base, `protocols.base.Protocol`, kept for plugins and
notes written before it became `protocols.node_base.ProtocolNode`: the name still resolves, with
a DeprecationWarning on every import."""

from __future__ import annotations

import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    if name != "Protocol":
        raise AttributeError(f"module 'protocols.base' has no attribute {name!r}")
    warnings.warn("protocols.base.Protocol is deprecated: use protocols.sdk.ProtocolNode",
                  DeprecationWarning, stacklevel=2)
    from protocols.node_base import ProtocolNode

    return ProtocolNode
