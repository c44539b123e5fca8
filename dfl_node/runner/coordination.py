"""What a protocol's coordinator computes, apart from the pre-phase's channels
(dfl_node/runner/prephase_client.py: ZeroMQ, numpy): a protocol's declaration names this type,
and the launcher reads every declaration before it checks a request (issue 45)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Coordination:
    """What a protocol's coordinator computes: an answer per node, the JSON record that goes to
    prephase.json, and further JSON files for the run directory (name -> content)."""

    answers: dict[int, dict[str, np.ndarray]]
    record: dict[str, Any]
    files: dict[str, Any] = field(default_factory=dict)
