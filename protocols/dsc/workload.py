"""What a DSC node learns: its task portfolio, its SynthScenes share and its routed model.

The DSC protocols bring their own learning problem (multi-task dense prediction,
docs/protocols/dsc.md#the-model) through `ProtocolNode.build_workload`; everything here is read from
the plan, so every process builds the same portfolios, data and common theta_0:
- portfolios: a topology node's `tasks` attribute, else the seeded draw of the plan's
  `scenes.portfolios` scheme;
- data: dataset `scenes` (the node renders its own training share and the common test pool) or
  `nyuv2` (the files under the run's `data_root`, `protocols.dsc.nyu`: the node loads the pool
  and keeps its Dirichlet share of the training split, and the whole `val` split as test set);
- model: the routed ResNet `model.backbone` with the semantic channel `model.channel`
  ({kind, snr_db}), the section `RoutedModelConfig` declares; the node builds it
  (`DSC.build_workload`), since only it imports torch: the launcher checks a plan and prepares
  the datasets with this module.

The metrics record's `accuracy` is a *task score* in [0, 1], the mean over the node's tasks of one
headline number each (seg pixel accuracy, sn % within 30 degrees, dep % with delta < 1.25,
kp/edge 1 - L1), so the launcher's accuracy columns stay meaningful; the full metrics go beside
it as `task_metrics`, and Delta_all (Eq. 42-44) is computed against a no-aggregation run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dfl_config.problems import one_line
from protocols.dsc.dataset_options import NyuOptions, SceneOptions
from protocols.dsc.nyu import FOLDERS, NYU_CLASSES, count_images, load_nyu, read
from protocols.dsc.portfolios import Portfolio, node_portfolios
from protocols.dsc.report_table import HEADLINE
from protocols.dsc.routed_config import RoutedModelConfig
from protocols.dsc.scenes import CLASSES, node_scenes, train_sizes
from protocols.dsc.taskdata import TaskSet, dirichlet_sizes, node_share
from protocols.sdk import RunPlan

DATASETS = ("scenes", "nyuv2")

@dataclass(frozen=True)
class SceneData:
    """A node's training share and the common test pool, with only its tasks' labels."""

    train: TaskSet
    test: TaskSet


def scene_options(section: Mapping[str, Any]) -> SceneOptions:
    """The `scenes` options section (a config's or the plan's data section's); ValueError
    (one line) on a bad one."""
    try:
        return SceneOptions.model_validate(section)
    except ValidationError as exc:
        raise ValueError(one_line(exc, SceneOptions, ("scenes",))) from None


def routed_config(model: Mapping[str, Any]) -> RoutedModelConfig:
    """The plan's `model` section; ValueError (one line) on a bad one."""
    try:
        return RoutedModelConfig.model_validate(model)
    except ValidationError as exc:
        raise ValueError(one_line(exc, RoutedModelConfig, ("model",))) from None


def nyu_options(section: Mapping[str, Any]) -> NyuOptions:
    """The `nyuv2` options section (a config's or the plan's data section's); ValueError
    (one line) on a bad one."""
    try:
        return NyuOptions.model_validate(section)
    except ValidationError as exc:
        raise ValueError(one_line(exc, NyuOptions, ("nyuv2",))) from None


def plan_portfolios(plan: RunPlan) -> dict[int, Portfolio]:
    """NYU-v2 labels only Seg, Sn and Dep, so it always draws the `nyu` scheme."""
    scheme = "nyu" if plan.data.dataset == "nyuv2" \
        else scene_options(plan.data.options("scenes")).portfolios
    return node_portfolios({n.id: n.attrs for n in plan.nodes}, plan.seed, scheme)


def prepare_scenes(config: Mapping[str, Any]) -> dict[str, Any]:
    """The `scenes` dataset for the launcher: nothing to prepare or split, since each node
    renders its own; the options are checked (ValueError) and the data section's keys given."""
    opts = scene_options(config.get("scenes") or {})
    return {"num_classes": len(CLASSES), "shape": [3, opts.size, opts.size],
            "eval_size": opts.test_size}


def nyu_root(root: str | None) -> str:
    if not root:
        raise ValueError("NYU-v2 is read from --data-root DIR (ROOT/{train,val}/...): none given")
    return str(root)


def prepare_nyu(config: Mapping[str, Any]) -> dict[str, Any]:
    """The `nyuv2` dataset for the launcher: its files must be there (one line naming the
    first one missing otherwise), since each node reads them itself; nothing is cached."""
    nyu_options(config.get("nyuv2") or {})
    root = nyu_root(config.get("data_root"))
    test = count_images(root, "test")
    count_images(root, "train")
    image = read(Path(root) / "val" / FOLDERS["image"] / "0.npy")
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"NYU-v2 images must be (H, W, 3), got {image.shape}")
    return {"num_classes": NYU_CLASSES, "shape": [3, *image.shape[:2]], "eval_size": test}


def check_scene_plan(plan: RunPlan) -> None:
    """ValueError (one line) unless the plan is one a scene workload can serve (its dataset,
    model, portfolios and training sizes); the launcher calls it (via `DSC.check_plan`) before
    any node starts."""
    dataset = plan.data.dataset
    if dataset not in DATASETS:
        raise ValueError(f"{plan.protocol} learns dense multi-task scenes: use --dataset "
                         f"{' or '.join(DATASETS)}, not {dataset!r}")
    routed_config(plan.model)
    portfolios = plan_portfolios(plan)
    if dataset == "nyuv2":
        for node, tasks in portfolios.items():
            absent = [t for t in tasks if t not in FOLDERS]
            if absent:
                raise ValueError(f"node {node}: NYU-v2 has no labels for {absent} "
                                 "(it has seg, sn, dep)")
        opts = nyu_options(plan.data.options("nyuv2"))
        try:
            dirichlet_sizes(count_images(nyu_root(plan.data.data_root), "train"),
                            len(plan.clients), opts.alpha, opts.min_size, plan.seed)
        except ValueError as exc:
            raise ValueError(f"nyuv2: {exc}") from None
        return
    try:
        train_sizes(scene_options(plan.data.options("scenes")), plan.seed, len(plan.clients))
    except ValueError as exc:
        raise ValueError(f"scenes: {exc}") from None


def scene_data(plan: RunPlan, node_id: int) -> SceneData:
    """Node `node_id`'s data, with only its portfolio's labels, once the plan is checked."""
    check_scene_plan(plan)
    tasks = plan_portfolios(plan)[node_id]
    if plan.data.dataset == "nyuv2":
        opts, root = nyu_options(plan.data.options("nyuv2")), nyu_root(plan.data.data_root)
        train = node_share(load_nyu(root, "train", tasks), plan.clients, node_id, tasks,
                           opts.alpha, opts.min_size, plan.seed)
        return SceneData(train, load_nyu(root, "test", tasks))
    train, test = node_scenes(scene_options(plan.data.options("scenes")), plan.seed,
                              plan.clients, node_id, tasks)
    return SceneData(train, test)


def task_score(metrics: Mapping[str, Mapping[str, float]]) -> float:
    """Mean over tasks of the headline number mapped to [0, 1] (see the module docstring)."""
    values = []
    for task, result in metrics.items():
        name, scale = HEADLINE[task]
        values.append(result[name] * scale if scale > 0 else 1.0 + result[name] * scale)
    return sum(values) / len(values)
