"""A backdoor's success, measured by every honest node beside its accuracy
(docs/protocols/robust.md#measuring-a-backdoor).

When an adversary of the plan plants a `backdoor`, each honest node also evaluates its eval
split stamped with the trigger, leaving out the samples of the target class, and reports
`backdoor_asr`: the share predicted as the target (`poisoning.attack_success_rate`, computed as
the evaluation's accuracy against the target label, so that it is one more pass of the
evaluation's own loop). The launcher's summary gives its honest mean and worst.

An honest node learns which triggers to test, never who plants them: `build_workload` reads the
whole plan before the protocol object exists (which gets the plan without its adversaries,
`RunPlan.seen_by_protocol`) and hands the triggers on with the node's data. The stamped split
is made at each evaluation and dropped after it, so a node holds no second copy of its split.

The trigger is the one the adversary trains on: its square of the brightest pixel is stamped on
raw uint8 images (`poisoning.backdoor` on `ImageRows.pixels`), and an eval split is already
normalised, so the square here holds that pixel normalised as the split was, channel by channel;
on arrays handed over as float it is 1.0 on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
from torch import nn

from dfl_node.learning.arrays import ImageRows, normalised
from dfl_node.learning.shards import NodeData
from dfl_node.learning.training import evaluate
from dfl_node.plan import RunPlan
from protocols.robust.adversary_settings import Backdoor, behaviours_of
from protocols.robust.poisoning import stamp_trigger


@dataclass(frozen=True, order=True)
class Trigger:
    """What a backdoor's test needs: the target class and the square's size."""

    target: int
    size: int


@dataclass(frozen=True)
class ProbedData(NodeData):
    """An honest node's data, with the triggers of the plan's backdoors it measures."""

    triggers: tuple[Trigger, ...] = ()


def backdoor_triggers(plan: RunPlan, node_id: int) -> tuple[Trigger, ...]:
    """The distinct triggers of the plan's backdoors, sorted; none for an adversary or an
    aggregator (the honest clients measure) or a run without a backdoor."""
    if node_id in plan.adversaries or node_id not in plan.clients:
        return ()
    return tuple(sorted({Trigger(b.target, b.size) for data in plan.adversaries.values()
                         for b in behaviours_of(data) if isinstance(b, Backdoor)}))


def with_backdoor_probe(plan: RunPlan, node_id: int, data: Any) -> Any:
    """`data` with the triggers node `node_id` measures (itself when none). The launcher has
    refused a backdoor on samples that are not images (launcher/config/adversaries.py)."""
    triggers = backdoor_triggers(plan, node_id)
    if not triggers or not isinstance(data, NodeData):
        return data
    return ProbedData(**{f.name: getattr(data, f.name) for f in fields(NodeData)},
                      triggers=triggers)


def brightest(data: NodeData) -> list[float] | None:
    """The value of the trigger's pixels in the eval split, per channel: a 255 pixel normalised
    as the split's images were; None for samples handed over as float (the trigger's 1.0)."""
    rows = data.x_train
    if not isinstance(rows, ImageRows):
        return None
    ndim = rows.pixels.ndim
    pixel = np.full((1, *rows.pixels.shape[1:-2], 1, 1), 255, dtype=np.uint8)
    return [float(v) for v in normalised(pixel, rows.mean, rows.std, ndim).ravel()]


def triggered(data: NodeData, trigger: Trigger) -> tuple[np.ndarray, np.ndarray] | None:
    """The eval split's samples outside the target class, stamped, labelled with the target;
    None when every sample is of the target class."""
    others = np.asarray(data.y_eval) != trigger.target
    if not others.any():
        return None
    images = torch.from_numpy(np.asarray(data.x_eval)[others])
    values = brightest(data)
    if values is None:
        stamped = stamp_trigger(images, trigger.size)
    elif images.dim() == 3:  # (N, H, W): one channel
        stamped = stamp_trigger(images, trigger.size, values[0])
    else:
        stamped = torch.cat([stamp_trigger(images[:, c:c + 1], trigger.size, value)
                             for c, value in enumerate(values)], dim=1)
    return stamped.numpy(), np.full(int(others.sum()), trigger.target, dtype=np.int64)


def backdoor_keys(model: nn.Module, data: Any, device: torch.device,
                  batch: int) -> dict[str, float]:
    """{"backdoor_asr": the share of the triggered samples outside each target class predicted
    as it, every trigger's samples pooled}; {} for a node that measures none (or whose split
    holds only target-class samples)."""
    if not isinstance(data, ProbedData):
        return {}
    splits = [split for t in data.triggers if (split := triggered(data, t)) is not None]
    if not splits:
        return {}
    images = [x for x, _ in splits]
    targets = [y for _, y in splits]
    asr, _ = evaluate(model, np.concatenate(images), np.concatenate(targets), device,
                      batch=batch)
    return {"backdoor_asr": asr}
