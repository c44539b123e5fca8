"""What the launcher knows of the DSC family (DSC and its four baselines): their settings, checks,
datasets, model, `jstar` command, report and run-level summary keys (protocols/spec.py). The
algorithms are the node classes in dsc.py and dsc_baselines.py."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from dfl_config.section import Section
from protocols.capabilities import RunReport
from protocols.describe import DatasetPreparer
from protocols.dsc import dsc_report
from protocols.dsc.dsc_summary import run_summary
from protocols.dsc.hyper import DSCFedAMPHyper, DSCFedAvgHyper, DSCHyper
from protocols.dsc.jstar import jstar_cmd
from protocols.dsc.nyu import NyuOptions
from protocols.dsc.portfolios import DSCNodeAttributes
from protocols.dsc.routed_spec import RoutedSpec
from protocols.dsc.scenes import SceneOptions
from protocols.dsc.workload import check_scene_plan, prepare_nyu, prepare_scenes
from protocols.sdk import RunPlan
from protocols.spec import ProtocolSpec


class DSCSpec(RunReport, ProtocolSpec[DSCHyper]):
    Hyper = DSCHyper
    is_reference: ClassVar[bool] = False  # the no-aggregation run Delta is measured against

    report_family = "dsc"
    report_table = dsc_report.TABLE
    score = dsc_report.SCORE
    multitask = dsc_report.MULTITASK
    launch_commands = (jstar_cmd,)
    datasets: ClassVar[Mapping[str, DatasetPreparer]] = {"scenes": prepare_scenes,
                                                         "nyuv2": prepare_nyu}
    dataset_options: ClassVar[Mapping[str, type[Section]]] = {"scenes": SceneOptions,
                                                              "nyuv2": NyuOptions}
    model_specs = (RoutedSpec,)
    node_attributes = DSCNodeAttributes

    @classmethod
    def check_plan(cls, plan: RunPlan) -> None:
        """Also that `delta_baseline` is a finished run here, where the launcher reads it
        (nodes on other hosts never do)."""
        check_scene_plan(plan)
        baseline = cls.settings(plan.hyper).delta_baseline
        if baseline is not None and not (Path(baseline) / "summary.json").is_file():
            raise ValueError(f"hyper.delta_baseline: must be a run directory with a "
                             f"summary.json, got {baseline!r}")

    @classmethod
    def settings(cls, hyper: Mapping[str, Any]) -> DSCHyper:
        """The plan's `hyper` as this protocol's model (outside a node, which has `self.hyper`)."""
        checked = cls.Hyper.model_validate(hyper)
        assert isinstance(checked, DSCHyper)
        return checked

    @classmethod
    def run_keys(cls, plan: RunPlan, reports: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
        baseline = cls.settings(plan.hyper).delta_baseline
        return run_summary(plan, reports, cls.is_reference, baseline)


class DSCNoAggSpec(DSCSpec):
    is_reference = True


class DSCMaxSpec(DSCSpec):
    """Declared as DSC is; the max affinity is its node class's."""


class DSCFedAvgSpec(DSCSpec):
    Hyper = DSCFedAvgHyper


class DSCFedAMPSpec(DSCSpec):
    Hyper = DSCFedAMPHyper
