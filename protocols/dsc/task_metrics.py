"""Dense-task metrics and the relative improvement over no aggregation (paper §V, Eq. 42-44).

Per task (paper §V; docs/protocols/dsc.md#metrics), accumulated over a whole evaluation split:
- seg: `miou` (IoU per class from one confusion matrix, mean over classes with a non-empty
  union) and `pacc`, both in %; pixels labelled `IGNORE` do not count;
- sn: angle between predicted and true normals in degrees: `mean`, `median`, and `a11`, `a22`,
  `a30` = % of pixels within 11.25, 22.5, 30 degrees;
- dep: over pixels with true depth > 0: `abs` = mean |d^ - d|, `rel` = mean |d^ - d| / d, and
  `d1`, `d2`, `d3` = % with max(d^/d, d/d^) < 1.25^k (a non-positive prediction never passes);
- kp, edge: `l1` = mean absolute error.

Relative change (Eq. 42-44): Delta_{i,t} = mean_q I_{t,q} (m - b)/b x 100 with I = +1 where
higher is better and -1 where lower is better; Delta_t averages the clients holding t, and
Delta_all averages the tasks. The baseline b_{t,q} is the client-averaged no-aggregation result
(docs/protocols/dsc.md#a7: this is what reproduces the paper's Table 2); the per-client
baseline is an option.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from protocols.dsc.taskdata import IGNORE

# I_{t,q}: +1 higher is better, -1 lower is better; the keys are the metric sets Q_t.
DIRECTIONS: dict[str, dict[str, int]] = {
    "seg": {"miou": 1, "pacc": 1},
    "sn": {"mean": -1, "median": -1, "a11": 1, "a22": 1, "a30": 1},
    "dep": {"abs": -1, "rel": -1, "d1": 1, "d2": 1, "d3": 1},
    "kp": {"l1": -1},
    "edge": {"l1": -1},
}
ANGLE_THRESHOLDS = {"a11": 11.25, "a22": 22.5, "a30": 30.0}
DELTA_BASE = 1.25

Metrics = dict[str, float]


class SegMeter:
    def __init__(self, classes: int) -> None:
        self.classes = classes
        self.confusion = torch.zeros(classes, classes, dtype=torch.int64)

    def update(self, pred: torch.Tensor, target: torch.Tensor) -> None:
        """`pred`: (N, C, H, W) logits; `target`: (N, H, W) labels."""
        labels = pred.argmax(dim=1)
        valid = target != IGNORE
        pairs = target[valid] * self.classes + labels[valid]
        self.confusion += torch.bincount(pairs.cpu(), minlength=self.classes**2).reshape(
            self.classes, self.classes)

    def result(self) -> Metrics:
        tp = self.confusion.diag().double()
        union = self.confusion.sum(0) + self.confusion.sum(1) - self.confusion.diag()
        seen = union > 0
        return {"miou": float((tp[seen] / union[seen]).mean() * 100),
                "pacc": float(tp.sum() / self.confusion.sum() * 100)}


class NormalMeter:
    def __init__(self) -> None:
        self.angles: list[torch.Tensor] = []

    def update(self, pred: torch.Tensor, target: torch.Tensor) -> None:
        """(N, 3, H, W) each; pixels whose true normal is zero are invalid."""
        valid = target.norm(dim=1) > 0
        cos = (F.normalize(pred, dim=1) * F.normalize(target, dim=1)).sum(dim=1)
        self.angles.append(torch.rad2deg(torch.acos(cos.clamp(-1, 1)))[valid].double().cpu())

    def result(self) -> Metrics:
        angles = torch.cat(self.angles)
        out = {"mean": float(angles.mean()), "median": float(angles.quantile(0.5))}
        out |= {q: float((angles < deg).double().mean() * 100)
                for q, deg in ANGLE_THRESHOLDS.items()}
        return out


class DepthMeter:
    def __init__(self) -> None:
        self.sums = {q: 0.0 for q in DIRECTIONS["dep"]}
        self.count = 0

    def update(self, pred: torch.Tensor, target: torch.Tensor) -> None:
        valid = target > 0
        d, g = pred[valid].double(), target[valid].double()
        err = (d - g).abs()
        ratio = torch.maximum(d / g, g / d.clamp_min(1e-12))  # d^ <= 0: ratio ~ 1e12
        self.sums["abs"] += float(err.sum())
        self.sums["rel"] += float((err / g).sum())
        for k in (1, 2, 3):
            self.sums[f"d{k}"] += float((ratio < DELTA_BASE**k).sum()) * 100
        self.count += int(valid.sum())

    def result(self) -> Metrics:
        return {q: s / self.count for q, s in self.sums.items()}


class L1Meter:
    def __init__(self) -> None:
        self.total, self.count = 0.0, 0

    def update(self, pred: torch.Tensor, target: torch.Tensor) -> None:
        self.total += float((pred - target).abs().double().sum())
        self.count += target.numel()

    def result(self) -> Metrics:
        return {"l1": self.total / self.count}


Meter = SegMeter | NormalMeter | DepthMeter | L1Meter


def meter_for(task: str, seg_classes: int) -> Meter:
    if task == "seg":
        return SegMeter(seg_classes)
    meters: dict[str, Callable[[], Meter]] = {
        "sn": NormalMeter, "dep": DepthMeter, "kp": L1Meter, "edge": L1Meter}
    return meters[task]()


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
