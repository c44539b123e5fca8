"""The relative improvement over no aggregation (paper Eq. 42-44; docs/protocols/dsc.md#metrics).

Delta_{i,t} = mean_q I_{t,q} (m - b)/b x 100 with I = +1 where higher is better and -1 where
lower is better; Delta_t averages the clients holding t, and Delta_all averages the tasks. The
baseline b_{t,q} is the client-averaged no-aggregation result (docs/protocols/dsc.md#a7: this is
what reproduces the paper's Table 2); the per-client baseline is an option.

Apart from the meters that measure the metrics (task_metrics.py, torch) because the launcher
computes it from finished runs' summaries (run_summary.py, report_table.py) without torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# I_{t,q}: +1 higher is better, -1 lower is better; the keys are the metric sets Q_t.
DIRECTIONS: dict[str, dict[str, int]] = {
    "seg": {"miou": 1, "pacc": 1},
    "sn": {"mean": -1, "median": -1, "a11": 1, "a22": 1, "a30": 1},
    "dep": {"abs": -1, "rel": -1, "d1": 1, "d2": 1, "d3": 1},
    "kp": {"l1": -1},
    "edge": {"l1": -1},
}

Metrics = dict[str, float]


def relative_change(measured: Mapping[str, float], baseline: Mapping[str, float],
                    task: str) -> float:
    """Delta_{i,t} in % (Eq. 42): direction-signed relative changes averaged over Q_t."""
    q_t = DIRECTIONS[task]
    return sum(sign * (measured[q] - baseline[q]) / baseline[q]
               for q, sign in q_t.items()) / len(q_t) * 100


TaskMetrics = Mapping[str, Mapping[str, float]]  # task -> metric -> value


def client_averaged_baseline(noagg: Mapping[int, TaskMetrics]) -> dict[str, Metrics]:
    """b_{t,q} = mean over the clients holding t of their no-aggregation metric
    (docs/protocols/dsc.md#a7)."""
    tasks = sorted({t for per_client in noagg.values() for t in per_client})
    out = {}
    for t in tasks:
        rows = [m[t] for m in noagg.values() if t in m]
        out[t] = {q: sum(r[q] for r in rows) / len(rows) for q in DIRECTIONS[t]}
    return out


@dataclass(frozen=True)
class DeltaReport:
    """Delta_{i,t} per client and task, Delta_t per task and Delta_all, all in %."""

    per_client: dict[int, dict[str, float]]
    per_task: dict[str, float]
    delta_all: float


def delta_report(results: Mapping[int, TaskMetrics], noagg: Mapping[int, TaskMetrics],
                 per_client_baseline: bool = False) -> DeltaReport:
    """Eq. 42-44 for one method's per-client metrics against the no-aggregation run's."""
    shared = client_averaged_baseline(noagg)
    per_client = {
        i: {t: relative_change(m[t], noagg[i][t] if per_client_baseline else shared[t], t)
            for t in m}
        for i, m in sorted(results.items())}
    tasks = sorted({t for deltas in per_client.values() for t in deltas})
    per_task = {}
    for t in tasks:
        holders = [d[t] for d in per_client.values() if t in d]
        per_task[t] = sum(holders) / len(holders)
    return DeltaReport(per_client, per_task, sum(per_task.values()) / len(per_task))
