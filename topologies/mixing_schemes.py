"""The mixing schemes by name, apart from their matrices (topologies/mixing.py, numpy): a run
config's `mixing` key is checked against these before a run imports numpy (issue 45)."""

from __future__ import annotations

from typing import Literal

MixingScheme = Literal["metropolis", "max-degree", "unit", "weighted", "lazy-metropolis",
                       "lazy-max-degree"]
"""Every scheme of topologies/mixing.py's table by name: a run config's `mixing` (its WEIGHTS,
`weighted` and the lazy forms of the STOCHASTIC ones)."""
