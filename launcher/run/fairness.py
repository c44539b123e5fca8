"""Fairness figures over the clients' final accuracies and losses
(docs/run-directory.md#summary-figures)."""

from __future__ import annotations

import math


def tail_count(n: int, fraction: float = 0.1) -> int:
    return max(1, math.ceil(fraction * n))


def fairness(accuracies: list[float], losses: list[float]) -> dict[str, float]:
    """bottom10_accuracy: mean of the ceil(0.1 n) worst; std_accuracy: ddof 0; jain_index:
    (sum a)^2 / (n sum a^2); cvar10_loss: mean of the ceil(0.1 n) largest losses."""
    import numpy as np  # once a run has ended: `import dfl_mesh` and a refusal need none

    acc = np.sort(np.asarray(accuracies, dtype=np.float64))
    loss = np.sort(np.asarray(losses, dtype=np.float64))[::-1]
    squares = float(np.sum(acc**2))
    return {
        "bottom10_accuracy": float(acc[: tail_count(len(acc))].mean()),
        "std_accuracy": float(acc.std(ddof=0)),
        "jain_index": float(acc.sum() ** 2 / (len(acc) * squares)) if squares else 1.0,
        "cvar10_loss": float(loss[: tail_count(len(loss))].mean()),
    }
