"""What each dense task scores without looking at the image: the bar a DSC model must clear before
its metrics (and Delta, Eq. 42-44, taken against a no-aggregation run that may itself have learned
nothing) say anything about training.

From a node's own training scenes, scored by the same meters on the same test scenes as its model
(task_metrics.py):
- seg: the most frequent class of each pixel position;
- sn: the mean normal, renormalised;
- dep: the mean depth of the valid pixels;
- kp, edge: the per-pixel median map (the constant map of least L1).
"""

from __future__ import annotations

import numpy as np
import torch

from protocols.dsc.delta import Metrics
from protocols.dsc.task_metrics import meter_for
from protocols.dsc.taskdata import IGNORE, TaskSet
from protocols.dsc.workload import scene_data
from protocols.sdk import RunPlan


def trivial_map(task: str, target: np.ndarray, seg_classes: int) -> np.ndarray:
    """One prediction (the decoder's output for a single image) from a task's training labels."""
    if task == "seg":
        counts = np.stack([(target == c).sum(axis=0) for c in range(seg_classes)])
        return np.eye(seg_classes, dtype=np.float32)[counts.argmax(axis=0)].transpose(2, 0, 1)
    if task == "sn":
        valid = np.linalg.norm(target, axis=1) > 0
        mean = target.transpose(1, 0, 2, 3)[:, valid].mean(axis=1)
        mean = mean / max(float(np.linalg.norm(mean)), 1e-12)
        return np.broadcast_to(mean[:, None, None], target.shape[1:]).astype(np.float32)
    if task == "dep":
        return np.full(target.shape[1:], target[target > 0].mean(), dtype=np.float32)
    return np.median(target, axis=0).astype(np.float32)


def trivial_metrics(train: TaskSet, test: TaskSet) -> dict[str, Metrics]:
    """Every task of `train` scored on `test`, as `evaluate` scores a model."""
    out = {}
    for task in train.tasks:
        target = train.targets[task]
        if task == "seg":
            target = np.where(target == IGNORE, -1, target)
        guess = torch.from_numpy(trivial_map(task, target, train.seg_classes))
        meter = meter_for(task, test.seg_classes)
        truth = torch.from_numpy(np.ascontiguousarray(test.targets[task]))
        meter.update(guess.expand(len(test), *guess.shape), truth)
        out[task] = meter.result()
    return out


def run_trivial_metrics(plan: RunPlan) -> dict[int, dict[str, Metrics]]:
    """Each client's trivial scores for its portfolio, on the data the run's nodes used."""
    out = {}
    for node in plan.clients:
        data = scene_data(plan, node)
        out[node] = trivial_metrics(data.train, data.test)
    return out
