"""The optimal aggregation depth J* of DSC (paper §IV, Eq. 39-41;
docs/protocols/dsc.md#theory-and-the-optimal-depth).

The Lyapunov bound's steady-state floor in the depth J is

    Bound(J) = A / (1 - rho^{2J}) + alpha B (1 - rho^{2J})                      (Eq. 39)

A (statistical heterogeneity, shrinking with deeper mixing) against alpha B (the over-consensus
bias, growing with it). With y = 1 - rho^{2J}, A/y + alpha B y is strictly convex with minimum at
y* = sqrt(A / (alpha B)), so for alpha B > A

    J* = ln(1 / (1 - sqrt(A / (alpha B)))) / (-2 ln rho)                         (Eq. 41)

and for alpha B <= A the bound falls monotonically in J (J* = infinity: mix as deep as allowed).
The deployed depth is the better of floor(J*) and ceil(J*) (at least 1), capped at J_max.

The paper gives no numbers for A, alpha or B; `fit_constants` recovers them from a J sweep's
measured error (for example -Delta_all or the final test loss) as err(J) = c0 + A x1 + alpha B x2
with x1 = 1/(1 - rho^{2J}), x2 = 1 - rho^{2J}, by least squares with A, alpha B >= 0 (c0 free).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def check_rho(rho: float) -> None:
    if not 0.0 < rho < 1.0:
        raise ValueError(f"rho must be in (0, 1), got {rho!r}")


def contraction(rho: float, depth: float) -> float:
    """1 - rho^{2J}: how much of the consensus error J mixing steps remove."""
    return 1.0 - rho ** (2.0 * depth)


def bound(depth: float, a: float, ab: float, rho: float) -> float:
    """Eq. 40 at depth J (a = A, ab = alpha B)."""
    check_rho(rho)
    y = contraction(rho, depth)
    return a / y + ab * y


def continuous_depth(a: float, ab: float, rho: float) -> float:
    """Eq. 41; math.inf when alpha B <= A (the bound decreases in J)."""
    check_rho(rho)
    if a < 0 or ab < 0:
        raise ValueError(f"A and alpha B must be >= 0, got {a!r}, {ab!r}")
    if ab <= a:
        return math.inf
    return math.log(1.0 / (1.0 - math.sqrt(a / ab))) / (-2.0 * math.log(rho))


def deployed_depth(a: float, ab: float, rho: float, j_max: int) -> int:
    """The paper's integer rule: the better of floor/ceil of J* (>= 1), capped at J_max."""
    if j_max < 1:
        raise ValueError(f"J_max must be >= 1, got {j_max!r}")
    star = continuous_depth(a, ab, rho)
    if math.isinf(star) or star >= j_max:
        return j_max
    low, high = max(1, math.floor(star)), max(1, math.ceil(star))
    return min(min((low, high), key=lambda j: (bound(j, a, ab, rho), j)), j_max)


@dataclass(frozen=True)
class Fit:
    """err(J) ~ c0 + A/(1 - rho^{2J}) + alpha B (1 - rho^{2J}), least squares, A, alpha B >= 0."""

    c0: float
    a: float
    ab: float
    residual: float  # root-mean-square error of the fit


def fit_constants(depths: Sequence[int], errors: Sequence[float], rho: float) -> Fit:
    """Bounded least squares, solved exactly: every face of {A >= 0, alpha B >= 0} is an ordinary
    least-squares problem; the best feasible face solution is the constrained optimum."""
    check_rho(rho)
    if len(depths) != len(errors) or len(depths) < 3:
        raise ValueError("the fit needs at least three (J, error) points")
    import numpy as np  # here: the jstar command is declared with DSC, and reading it needs none

    y = np.asarray(errors, dtype=np.float64)
    x = np.array([[1.0, 1.0 / contraction(rho, j), contraction(rho, j)] for j in depths])
    best: tuple[float, np.ndarray] | None = None
    for free in itertools.product((True, False), repeat=2):
        cols = [0] + [k + 1 for k in range(2) if free[k]]
        coef, *_ = np.linalg.lstsq(x[:, cols], y, rcond=None)
        full = np.zeros(3)
        full[cols] = coef
        if (full[1:] < 0).any():
            continue
        sse = float(np.sum((x @ full - y) ** 2))
        if best is None or sse < best[0]:
            best = (sse, full)
    assert best is not None  # the face A = alpha B = 0 is always feasible
    sse, (c0, a, ab) = best
    return Fit(float(c0), float(a), float(ab), math.sqrt(sse / len(y)))
