"""Each paper's experiments as recipes: the arms every reproducible figure and table needs at
each budget (quick: CI's slow suite; medium: at most 60 minutes each on a 2-core machine,
sharing runs, with the proposed method trained; paper: the paper's own rounds, seeds and N).

A recipe module has PAPER and `recipes(budget, out, data_root) -> {experiment id: Recipe}`;
each Recipe carries its measured cost here (Recipe.cost), from which the estimate printed
before a budget starts is made.
"""

from __future__ import annotations

from types import ModuleType

from bench.reproduce.recipes import clippedgossip, dmflsq, dsc, ssdfl

RECIPES: dict[str, ModuleType] = {m.PAPER: m for m in (dmflsq, ssdfl, dsc, clippedgossip)}
