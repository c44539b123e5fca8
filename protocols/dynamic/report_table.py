"""The dynamic-graph family's table in `dfl-report`: what both papers compare, the nodes'
average and worst accuracy, their spread, and the formula bits each node sent (SGP and
Epidemic Learning both claim accuracy for fewer messages than all-to-neighbours gossip).

Its members (SGP, Epidemic Learning) name it as their `report_family`.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocols.describe import Column, ReportTable, Summary, summary_key

COLUMNS = [
    Column("avg_accuracy", "Avg acc", "fraction", summary_key("avg_accuracy")),
    Column("worst_accuracy", "Worst acc", "fraction", summary_key("worst_accuracy")),
    Column("std_accuracy", "Acc std", "fraction", summary_key("std_accuracy")),
    Column("bits_per_client", "Bits/client", "bits", summary_key("bits_per_client")),
]


def columns(summaries: Sequence[Summary]) -> list[Column]:
    return COLUMNS


TABLE = ReportTable("Directed and time-varying graphs (SGP, Epidemic Learning)", columns,
                    rows=("sgp", "epidemic"), position=4)
