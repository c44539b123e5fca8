"""What a DSC node learns: its task portfolio, its SynthScenes share and its routed model.

The DSC protocols bring their own learning problem (multi-task dense prediction,
docs/protocols/dsc.md#the-model) through `Protocol.build_workload`; everything here is read from
the plan, so every process builds the same portfolios, data and common theta_0:
- portfolios: a topology node's `tasks` attribute, else the seeded draw of the plan's
  `scenes.portfolios` scheme (`nyu` by default);
- data: dataset `scenes` only (the node renders its own training share and the common test pool);
- model: the routed ResNet `model.backbone` (`mini` by default) with the semantic channel
  `model.channel` ({kind, snr_db}).

The metrics record's `accuracy` is a *task score* in [0, 1], the mean over the node's tasks of one
headline number each (seg pixel accuracy, sn % within 30 degrees, dep % with delta < 1.25,
kp/edge 1 - L1), so the launcher's accuracy columns stay meaningful; the full metrics go beside
it as `task_metrics`, and Delta_all (Eq. 42-44) is computed against a no-aggregation run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dfl_node.plan import RunPlan
from protocols.dsc.portfolios import Portfolio, draw_portfolios, node_portfolios
from protocols.dsc.routed_model import (
    BACKBONES,
    MultiTaskSpec,
    RoutedMultiTaskNet,
    build_multitask_model,
)
from protocols.dsc.scenes import CLASSES, PORTFOLIOS_KEY, node_scenes, scene_spec
from protocols.dsc.semantic_channel import ChannelSpec
from protocols.dsc.taskdata import TaskSet

MODEL_NAME = "routed"
MODEL_KEYS = ("name", "backbone", "channel")
# One headline number per task for the task score: (metric, scale); a negative scale marks a
# lower-is-better metric, scored 1 + scale * value.
HEADLINE = {"seg": ("pacc", 0.01), "sn": ("a30", 0.01), "dep": ("d1", 0.01),
            "kp": ("l1", -1.0), "edge": ("l1", -1.0)}


@dataclass(frozen=True)
class SceneData:
    """A node's training share and the common test pool, with only its tasks' labels."""

    train: TaskSet
    test: TaskSet


def plan_portfolios(plan: RunPlan) -> dict[int, Portfolio]:
    scheme = plan.data.get("scenes", {}).get(PORTFOLIOS_KEY, "nyu")
    return node_portfolios({n.id: n.attrs for n in plan.nodes}, plan.seed, scheme)


def model_spec(model: Mapping[str, Any]) -> MultiTaskSpec:
    """The plan's `model` section as a MultiTaskSpec; ValueError (one line) on bad keys."""
    unknown = sorted(set(model) - set(MODEL_KEYS))
    if model.get("name", MODEL_NAME) != MODEL_NAME:
        raise ValueError(f"model.name must be {MODEL_NAME!r}, got {model.get('name')!r}")
    if unknown:
        raise ValueError(f"model: unknown key(s) {unknown} (known: {list(MODEL_KEYS)})")
    backbone = model.get("backbone", "mini")
    if backbone not in BACKBONES:
        raise ValueError(f"model.backbone must be one of {sorted(BACKBONES)}, got {backbone!r}")
    try:
        channel = ChannelSpec(**model.get("channel", {}))
    except TypeError as exc:
        raise ValueError(f"model.channel: {exc}") from None
    return MultiTaskSpec(backbone=backbone, seg_classes=len(CLASSES), channel=channel)


def prepare_scenes(data: Mapping[str, Any]) -> dict[str, Any]:
    """The `scenes` dataset for the launcher: nothing to prepare or split, since each node
    renders its own; the options are checked (ValueError) and the data section's keys given."""
    options = data.get("scenes", {})
    spec = scene_spec(options, data["seed"])
    draw_portfolios([0], 0, options.get(PORTFOLIOS_KEY, "nyu"))
    return {"num_classes": len(CLASSES), "shape": [3, spec.size, spec.size],
            "eval_size": spec.test_size}


def check_scene_plan(plan: RunPlan) -> None:
    """ValueError (one line) unless the plan's dataset and model are what a scene workload
    needs; the launcher calls it (via `DSC.check_plan`) before any node starts."""
    if plan.data.get("dataset") != "scenes":
        raise ValueError(f"{plan.protocol} learns dense multi-task scenes: use --dataset "
                         f"scenes, not {plan.data.get('dataset')!r}")
    model_spec(plan.model)


def build_scene_workload(plan: RunPlan, node_id: int) -> tuple[RoutedMultiTaskNet, SceneData]:
    check_scene_plan(plan)
    tasks = plan_portfolios(plan)[node_id]
    spec = scene_spec(plan.data.get("scenes", {}), plan.seed)
    train, test = node_scenes(spec, plan.clients, node_id, tasks)
    model = build_multitask_model(model_spec(plan.model), tasks, plan.seed, node_id)
    return model, SceneData(train, test)


def task_score(metrics: Mapping[str, Mapping[str, float]]) -> float:
    """Mean over tasks of the headline number mapped to [0, 1] (see the module docstring)."""
    values = []
    for task, result in metrics.items():
        name, scale = HEADLINE[task]
        values.append(result[name] * scale if scale > 0 else 1.0 + result[name] * scale)
    return sum(values) / len(values)
