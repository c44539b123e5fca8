"""Named choices of toolkit parts, as the settings of a protocol's `Hyper` spell them.

Here, without torch, because the launcher validates the settings (protocols/declaration.py); the
parts that act on them (trigger.py, max_consensus.py) import them from here.
"""

from __future__ import annotations

from typing import Literal, get_args

Schedule = Literal["constant", "inv_sqrt_t", "zero"]  # event-trigger thresholds (trigger.py)
SCHEDULES: tuple[str, ...] = get_args(Schedule)
TieBreak = Literal["larger_id", "smaller_id"]  # max-consensus ties (max_consensus.py)
TIE_BREAKS: tuple[str, ...] = get_args(TieBreak)
