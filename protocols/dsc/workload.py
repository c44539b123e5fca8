"""What a DSC node learns: its task portfolio, its SynthScenes share and its routed model.

The DSC protocols bring their own learning problem (multi-task dense prediction,
docs/protocols/dsc.md#the-model) through `Protocol.build_workload`; everything here is read from
the plan, so every process builds the same portfolios, data and common theta_0:
- portfolios: a topology node's `tasks` attribute, else the seeded draw of the plan's
  `scenes.portfolios` scheme;
- data: dataset `scenes` only (the node renders its own training share and the common test pool);
- model: the routed ResNet `model.backbone` with the semantic channel `model.channel`
  ({kind, snr_db}), the section `RoutedSpec` declares.

The metrics record's `accuracy` is a *task score* in [0, 1], the mean over the node's tasks of one
headline number each (seg pixel accuracy, sn % within 30 degrees, dep % with delta < 1.25,
kp/edge 1 - L1), so the launcher's accuracy columns stay meaningful; the full metrics go beside
it as `task_metrics`, and Delta_all (Eq. 42-44) is computed against a no-aggregation run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from dfl_config.problems import one_line
from dfl_node.plan import RunPlan
from protocols.dsc.portfolios import Portfolio, node_portfolios
from protocols.dsc.routed_model import RoutedMultiTaskNet, RoutedSpec, build_multitask_model
from protocols.dsc.scenes import CLASSES, SceneOptions, node_scenes, train_sizes
from protocols.dsc.taskdata import TaskSet

# One headline number per task for the task score: (metric, scale); a negative scale marks a
# lower-is-better metric, scored 1 + scale * value.
HEADLINE = {"seg": ("pacc", 0.01), "sn": ("a30", 0.01), "dep": ("d1", 0.01),
            "kp": ("l1", -1.0), "edge": ("l1", -1.0)}


@dataclass(frozen=True)
class SceneData:
    """A node's training share and the common test pool, with only its tasks' labels."""

    train: TaskSet
    test: TaskSet


def scene_options(data: Mapping[str, Any]) -> SceneOptions:
    """The data section's `scenes` options; ValueError (one line) on a bad one."""
    try:
        return SceneOptions.model_validate(data.get("scenes", {}))
    except ValidationError as exc:
        raise ValueError(one_line(exc, SceneOptions, ("scenes",))) from None


def routed_spec(model: Mapping[str, Any]) -> RoutedSpec:
    """The plan's `model` section; ValueError (one line) on a bad one."""
    try:
        return RoutedSpec.model_validate(model)
    except ValidationError as exc:
        raise ValueError(one_line(exc, RoutedSpec, ("model",))) from None


def plan_portfolios(plan: RunPlan) -> dict[int, Portfolio]:
    return node_portfolios({n.id: n.attrs for n in plan.nodes}, plan.seed,
                           scene_options(plan.data).portfolios)


def prepare_scenes(data: Mapping[str, Any]) -> dict[str, Any]:
    """The `scenes` dataset for the launcher: nothing to prepare or split, since each node
    renders its own; the options are checked (ValueError) and the data section's keys given."""
    opts = scene_options(data)
    return {"num_classes": len(CLASSES), "shape": [3, opts.size, opts.size],
            "eval_size": opts.test_size}


def check_scene_plan(plan: RunPlan) -> None:
    """ValueError (one line) unless the plan is one a scene workload can serve (its dataset,
    model, portfolios and training sizes); the launcher calls it (via `DSC.check_plan`) before
    any node starts."""
    if plan.data.get("dataset") != "scenes":
        raise ValueError(f"{plan.protocol} learns dense multi-task scenes: use --dataset "
                         f"scenes, not {plan.data.get('dataset')!r}")
    routed_spec(plan.model)
    plan_portfolios(plan)
    try:
        train_sizes(scene_options(plan.data), plan.seed, len(plan.clients))
    except ValueError as exc:
        raise ValueError(f"scenes: {exc}") from None


def build_scene_workload(plan: RunPlan, node_id: int) -> tuple[RoutedMultiTaskNet, SceneData]:
    check_scene_plan(plan)
    tasks = plan_portfolios(plan)[node_id]
    train, test = node_scenes(scene_options(plan.data), plan.seed, plan.clients, node_id, tasks)
    model = build_multitask_model(routed_spec(plan.model), tasks, len(CLASSES), plan.seed,
                                  node_id)
    return model, SceneData(train, test)


def task_score(metrics: Mapping[str, Mapping[str, float]]) -> float:
    """Mean over tasks of the headline number mapped to [0, 1] (see the module docstring)."""
    values = []
    for task, result in metrics.items():
        name, scale = HEADLINE[task]
        values.append(result[name] * scale if scale > 0 else 1.0 + result[name] * scale)
    return sum(values) / len(values)
