"""The old module of the protocol node base, `protocols.base.Protocol`, kept for plugins and
notes written before it became `protocols.node_base.ProtocolNode`: the name still resolves, with
a DeprecationWarning on every import."""

from __future__ import annotations

from typing import Any

from dfl_config.renamed import renamed_names


def _protocol_node() -> Any:
    from protocols.node_base import ProtocolNode

    return ProtocolNode


__getattr__ = renamed_names(__name__, {"Protocol": ("protocols.sdk.ProtocolNode", _protocol_node)})
