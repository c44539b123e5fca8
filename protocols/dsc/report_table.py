"""What the launcher shows of the DSC family: its `dfl-report` table (the paper's Table 2:
Delta per task and Delta_all, in % against no aggregation; runs without a `delta_baseline`
have none), the task score its metrics' `accuracy` holds, and the per-task plots.

Its members (DSC and its four baselines) name it as their `report_family`.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocols.describe import (
    Column,
    MultiTask,
    NodeTaskMetrics,
    ReportTable,
    Score,
    Summary,
    Task,
    names_in,
    nested,
    summary_key,
)
from protocols.dsc.delta import delta_report

# One headline number per task for the task score: (metric, scale); a negative scale marks a
# lower-is-better metric, scored 1 + scale * value.
HEADLINE = {"seg": ("pacc", 0.01), "sn": ("a30", 0.01), "dep": ("d1", 0.01),
            "kp": ("l1", -1.0), "edge": ("l1", -1.0)}


def columns(summaries: Sequence[Summary]) -> list[Column]:
    return [*(Column(f"delta_{task}", f"Δ {task} (%)", "percent", nested("delta_tasks", task))
              for task in names_in(summaries, "delta_tasks")),
            Column("delta_all", "Δ_all (%)", "percent", summary_key("delta_all"))]


TABLE = ReportTable("DSC family (relative improvement over no aggregation)", columns,
                    rows=("dsc", "dsc-noagg", "dsc-fedavg", "dsc-max", "dsc-fedamp"), position=3)

# The metrics' `accuracy`: the mean over the node's tasks of each task's headline number.
SCORE = Score("task score", "score")

TASK_LABELS = {"seg": "segmentation pixel accuracy (%)", "sn": "normals within 30° (%)",
               "dep": "depth δ < 1.25 (%)", "kp": "keypoint L1 error (normalised)",
               "edge": "edge L1 error (normalised)"}


def delta_all(ours: NodeTaskMetrics, baseline: NodeTaskMetrics) -> float:
    """Eq. 42-44's Delta_all of one round's evaluations against the baseline's."""
    return delta_report(ours, baseline).delta_all


# Each task's headline metric (a negative scale marks a lower-is-better one).
MULTITASK = MultiTask({task: Task(metric, scale > 0, TASK_LABELS[task])
                       for task, (metric, scale) in HEADLINE.items()},
                      "delta_baseline", "no-aggregation", "Eq. 42-44", delta_all)
