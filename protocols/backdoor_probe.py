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
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
from torch import nn

from dfl_node.learning.shards import NodeData
from dfl_node.learning.training import evaluate
from dfl_node.plan import RunPlan
from protocols.robust.adversary_settings import Backdoor, behaviours_of
from protocols.robust.errors import RobustnessError
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
    """The distinct triggers of the plan's backdoors, sorted; none for an adversary (the honest
    nodes measure) or a run without a backdoor."""
    if node_id in plan.adversaries:
        return ()
    return tuple(sorted({Trigger(b.target, b.size) for data in plan.adversaries.values()
                         for b in behaviours_of(data) if isinstance(b, Backdoor)}))


def with_backdoor_probe(plan: RunPlan, node_id: int, data: Any) -> Any:
    """`data` with the triggers node `node_id` measures (itself when none); a RobustnessError
    (one line) for samples that are not images, which a trigger cannot be stamped on."""
    triggers = backdoor_triggers(plan, node_id)
    if not triggers or not isinstance(data, NodeData):
        return data
    if data.x_eval.ndim < 3:
        raise RobustnessError(f"backdoor: its trigger is a square stamped on images (N, H, W) "
                              f"or (N, C, H, W), and dataset {plan.data.dataset}'s samples "
                              f"have shape {tuple(data.x_eval.shape[1:])}")
    return ProbedData(**{f.name: getattr(data, f.name) for f in fields(NodeData)},
                      triggers=triggers)


def backdoor_keys(model: nn.Module, data: Any, device: torch.device,
                  batch: int) -> dict[str, float]:
    """{"backdoor_asr": the share of the triggered samples outside each target class predicted
    as it, every trigger's samples pooled}; {} for a node that measures none (or whose split
    holds only target-class samples)."""
    if not isinstance(data, ProbedData):
        return {}
    images, targets = [], []
    for trigger in data.triggers:
        others = np.asarray(data.y_eval) != trigger.target
        if others.any():
            stamped = stamp_trigger(torch.from_numpy(np.asarray(data.x_eval)[others]),
                                    trigger.size)
            images.append(stamped.numpy())
            targets.append(np.full(int(others.sum()), trigger.target, dtype=np.int64))
    if not images:
        return {}
    asr, _ = evaluate(model, np.concatenate(images), np.concatenate(targets), device,
                      batch=batch)
    return {"backdoor_asr": asr}
