"""Each paper's experiments as recipes: the arms every reproducible figure and table needs at
each budget (quick: CI's slow suite; medium: at most 30 minutes each on a 2-core machine,
sharing runs; paper: the paper's own rounds, seeds and N).

A recipe module has PAPER, SECONDS_PER_ROUND (its measured cost here, for the paper budget's
estimate) and `recipes(budget, out, data_root) -> {experiment id: Recipe}`.
"""

from __future__ import annotations

from types import ModuleType

from bench.reproduce.recipes import dmflsq, dsc, ssdfl

RECIPES: dict[str, ModuleType] = {m.PAPER: m for m in (dmflsq, ssdfl, dsc)}
