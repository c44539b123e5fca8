"""The plan's `schedule` section: the round's medium access, computed by the launcher from the
user's `schedule` and `tdma` options and the topology (dfl_node/netsim/tdma.py plan_section),
and recomputed by every node, which refuses a plan whose slots differ from its own."""

from __future__ import annotations

from typing import Literal

from dfl_config.section import NonNegative, NonNegativeInt, Section

Mode = Literal["sync", "tdma"]
Slot = tuple[tuple[int, int], ...]
"""The directed links (sender, receiver) that transmit in one TDMA slot."""


class ScheduleSection(Section):
    mode: Mode = "sync"
    """sync: every link at once; tdma: links take turns in the slots below."""
    interference_range: NonNegative | None = None
    """R_I of the slot colouring; None when the topology has no positions (rule skipped)."""
    frame_length: NonNegativeInt = 0
    """Slots per TDMA frame."""
    slots: tuple[Slot, ...] = ()
    """Each slot's directed links (TdmaSchedule.to_json)."""
