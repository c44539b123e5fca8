"""The one error of this package: a rule or attack given parameters it cannot honour."""

from __future__ import annotations

from dfl_config.errors import DflMeshError


class RobustnessError(ValueError, DflMeshError):
    """Bad parameters for a robust rule or an attack (trimming more values than there are,
    Krum with too many Byzantine neighbours assumed, a negative radius); one line."""
