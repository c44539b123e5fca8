"""The `cycle_metrics:` section: which per-cycle metrics a run's collector computes
(launcher/results/cycle_metrics.py) and whether nodes send their parameters for them.

One model for the user's section and the plan's: the plan holds it with the thresholds in
ascending order, and the node and the collector read the same defaults from here.
"""

from __future__ import annotations

from dfl_config.section import NonNegativeInt, Section, UnitInterval


class CycleMetricsSettings(Section):
    """Per-cycle metrics (launcher/results/cycle_metrics.py)."""

    params_every: NonNegativeInt = 0
    """Parameters to the collector every k rounds (0: never)."""
    thresholds: tuple[UnitInterval, ...] = ()
    """Accuracy thresholds for cycles-to-threshold."""

    @property
    def wanted(self) -> bool:
        """Whether the run asks for per-cycle metrics at all (parameters or thresholds)."""
        return bool(self.params_every or self.thresholds)
