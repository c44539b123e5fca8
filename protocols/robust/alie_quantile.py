"""ALIE's z from the population alone, apart from the attack itself so that the launcher can
fix it in the plan (and refuse a population with no finite z) without importing torch."""

from __future__ import annotations

import math
from statistics import NormalDist

from protocols.robust.errors import RobustnessError


def alie_z(n: int, f: int) -> float:
    """ALIE's z_max (Baruch, Baruch, Goldberg 2019): with s = floor(n/2 + 1) - f
    supporters needed, the largest z with Phi(z) < (n - s) / n, Phi the standard normal CDF."""
    if n < 1 or f < 0 or f > n:
        raise RobustnessError(f"ALIE: f = {f} Byzantine of n = {n} workers is no population")
    s = math.floor(n / 2 + 1) - f
    p = (n - s) / n
    if not 0 < p < 1:
        raise RobustnessError(
            f"ALIE: n = {n}, f = {f} give s = {s} supporters and Phi(z) < {p:g}, which no "
            "finite z meets (it needs 0 < s < n)")
    return NormalDist().inv_cdf(p)
