"""Dense-task metrics (paper §V; docs/protocols/dsc.md#metrics), accumulated over a whole
evaluation split:
- seg: `miou` (IoU per class from one confusion matrix, mean over classes with a non-empty
  union) and `pacc`, both in %; pixels labelled `IGNORE` do not count;
- sn: angle between predicted and true normals in degrees: `mean`, `median`, and `a11`, `a22`,
  `a30` = % of pixels within 11.25, 22.5, 30 degrees;
- dep: over pixels with true depth > 0: `abs` = mean |d^ - d|, `rel` = mean |d^ - d| / d, and
  `d1`, `d2`, `d3` = % with max(d^/d, d/d^) < 1.25^k (a non-positive prediction never passes);
- kp, edge: `l1` = mean absolute error.

The relative improvement over no aggregation (Eq. 42-44) is in protocols/dsc/delta.py.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.nn import functional as F

from protocols.dsc.delta import DIRECTIONS, Metrics
from protocols.dsc.taskdata import IGNORE

ANGLE_THRESHOLDS = {"a11": 11.25, "a22": 22.5, "a30": 30.0}
DELTA_BASE = 1.25


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
