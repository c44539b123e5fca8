"""Event triggers: a node sends its innovation s only when ||s|| >= theta_t.

DMFL-SQ's trigger indicator is chi_i^t = 1{||s_i^{t+1}|| >= theta_t} (paper, eq. 18 and Alg. 1),
non-strict, with theta_t = theta_0 / sqrt(t + 1) in the experiments (t 0-based, so theta_0 =
theta at the first round). Schedules:
- "constant": theta_t = theta_0;
- "inv_sqrt_t": theta_t = theta_0 / sqrt(t + 1);
- "zero": theta_t = 0, so every finite norm fires (the "no event-triggering" ablation).
A silent node sends nothing on the data plane (`Exchange.optional`); what the formula charges
for its silence on each link is `silence(acc)`, the trigger term alone.
"""

from __future__ import annotations

import math

from protocols.toolkit.accounting import MessageAccounting
from protocols.toolkit.options import SCHEDULES


def threshold(schedule: str, theta0: float, t: int) -> float:
    """theta_t of `schedule` at 0-based round t."""
    if schedule not in SCHEDULES:
        raise ValueError(f"trigger schedule must be one of {SCHEDULES}, got {schedule!r}")
    if not (math.isfinite(theta0) and theta0 >= 0):
        raise ValueError(f"trigger theta0 must be a finite number >= 0, got {theta0!r}")
    if not isinstance(t, int) or isinstance(t, bool) or t < 0:
        raise ValueError(f"trigger round must be an int >= 0, got {t!r}")
    if schedule == "constant":
        return float(theta0)
    if schedule == "inv_sqrt_t":
        return theta0 / math.sqrt(t + 1)
    return 0.0


def fires(norm: float, theta: float) -> bool:
    """chi = 1{norm >= theta}: non-strict, as in the paper (a NaN norm never fires)."""
    return norm >= theta


def silence(acc: MessageAccounting) -> dict[str, int]:
    """The bits of sending nothing: eq. (18) still charges the trigger term b_trig on the link
    (chi = 0)."""
    return {"trigger": acc.b_trig}
