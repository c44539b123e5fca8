"""The plan's `prephase` section: where a protocol's one-time pre-phase meets its coordinator
(dfl_node/runner/prephase_client.py, launcher/run/prephase_coordinator.py); a plan whose
protocol has no pre-phase holds none."""

from __future__ import annotations

from dfl_config.section import Count, Positive, Section


class PrephaseSection(Section):
    bind: str
    """The coordinator's ZeroMQ bind address."""
    address: str
    """Where the nodes reach the coordinator."""
    timeout_s: Positive
    """How long either end waits: a coordinator on another host may start as late as the
    last node does (launcher/config/planner.py)."""
    max_bytes: Count
    """Largest pre-phase message either end accepts."""
