"""Topology node attributes the runtime reads (beside id, host, port, device, position)."""

from __future__ import annotations

from dfl_config.section import NonNegative, Section


class NodeRuntimeAttributes(Section):
    compute_ms: NonNegative | None = None
    """This node's time for one local step in the virtual clock; None: `link.compute_ms`."""
