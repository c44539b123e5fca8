"""The user's `tdma:` section: how far a transmission interferes (dfl_node/netsim/tdma.py).

Not to be confused with the plan's `schedule` section (mode, slots, frame length), which the
launcher computes from this one and the topology.
"""

from __future__ import annotations

from dfl_config.section import NonNegative, Section


class TdmaSettings(Section):
    interference_range: NonNegative | None = None
    """R_I, in the topology's position units; None: interference_factor x the communication
    range (docs/protocols/dsc.md#a11)."""
    interference_factor: NonNegative = 1.0
    """R_I as a multiple of the communication range, when interference_range is None."""
