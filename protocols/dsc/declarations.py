"""What the launcher knows of the DSC family (DSC and its four baselines): their settings, checks,
datasets, model, `jstar` command, report and run-level summary keys (protocols/declaration.py). The
algorithms are the node classes in node.py and baselines.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from protocols.capabilities import RunReport
from protocols.declaration import ProtocolDeclaration
from protocols.dsc import report_table
from protocols.dsc.dataset_options import NyuOptions, SceneOptions
from protocols.dsc.hyper import DSCFedAMPHyper, DSCFedAvgHyper, DSCHyper
from protocols.dsc.jstar import jstar_cmd
from protocols.dsc.portfolios import DSCNodeAttributes
from protocols.dsc.routed_config import RoutedModelConfig
from protocols.sdk import RunPlan


@dataclass(frozen=True)
class TaskReport(RunReport):
    """DSC's run keys: the per-task results, portfolios, policies and mixing matrices of every
    client, and Delta_all (Eq. 42-44) against the reference run."""

    reference: bool = False  # the no-aggregation run Delta is measured against

    def run_keys(self, plan: RunPlan, reports: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
        from protocols.dsc.run_summary import run_summary

        return run_summary(plan, reports, self.reference, delta_baseline(plan))


def is_reference(spec: ProtocolDeclaration[Any]) -> bool:
    """Whether `spec` is the reference run's (the no-aggregation baseline's)."""
    report = spec.capability(TaskReport)
    return report is not None and report.reference


def delta_baseline(plan: RunPlan) -> str | None:
    """`hyper.delta_baseline` (every DSC protocol's settings have it: protocols/dsc/hyper.py)."""
    baseline: str | None = plan.hyper.get("delta_baseline")
    return baseline


def check_plan(plan: RunPlan) -> None:
    """The scenes, model and portfolios fit the plan (`check_scene_plan`), and
    `delta_baseline` is a finished run here, where the launcher reads it (nodes on other
    hosts never do)."""
    from protocols.dsc.workload import check_scene_plan

    check_scene_plan(plan)
    baseline = delta_baseline(plan)
    if baseline is not None and not (Path(baseline) / "summary.json").is_file():
        raise ValueError(f"hyper.delta_baseline: must be a run directory with a "
                         f"summary.json, got {baseline!r}")


def prepare_scenes(config: Mapping[str, Any]) -> dict[str, Any]:
    """protocols/dsc/workload.py's, imported when a run prepares its data."""
    from protocols.dsc import workload

    return workload.prepare_scenes(config)


def prepare_nyu(config: Mapping[str, Any]) -> dict[str, Any]:
    """protocols/dsc/workload.py's, imported when a run prepares its data."""
    from protocols.dsc import workload

    return workload.prepare_nyu(config)


DSC_SPEC = ProtocolDeclaration(
    DSCHyper, capabilities=(TaskReport(),), check_plan=check_plan,
    report_family="dsc", report_table=report_table.TABLE, score=report_table.SCORE,
    multitask=report_table.MULTITASK, launch_commands=(jstar_cmd,),
    datasets={"scenes": prepare_scenes, "nyuv2": prepare_nyu},
    dataset_options={"scenes": SceneOptions, "nyuv2": NyuOptions},
    model_specs=(RoutedModelConfig,), node_attributes=DSCNodeAttributes,
    data_poisoning=False,  # its scenes are dense multi-task targets, not labels to flip
    # The mini run (docs/protocols/dsc.md): procedural multi-task scenes (their options, the
    # quick run's pool sizes, in `SceneOptions`), the routed mini ResNet, R = 30 rounds, each
    # mixing step one TDMA frame, a first evaluation soon (the paper-sized test pool:
    # --config protocols/configs/dsc-paper.yaml).
    run_defaults={"dataset": "scenes", "rounds": 30, "eval_every": 2, "model": {"name": "routed"},
                  "schedule": "tdma"})
# The baselines are declared as DSC is, but for the reference's report and their settings.
DSC_NOAGG_SPEC = replace(DSC_SPEC, capabilities=(TaskReport(reference=True),))
DSC_MAX_SPEC = replace(DSC_SPEC)  # the max affinity is its node class's
DSC_FEDAVG_SPEC = replace(DSC_SPEC, Hyper=DSCFedAvgHyper)
DSC_FEDAMP_SPEC = replace(DSC_SPEC, Hyper=DSCFedAMPHyper)
