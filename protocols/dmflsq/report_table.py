"""The DMFL-SQ family's table in `dfl-report` (the paper's Table II): average, worst and
bottom-10% client accuracy, the accuracies' std, Jain's index, formula bits per client.

Its members (D-PSGD, DSGT, q-FFL, CHOCO-SGD, DMFL-SQ) name it as their `report_family`.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocols.describe import Column, ReportTable, Summary, summary_key

COLUMNS = [
    Column("avg_accuracy", "Avg acc", "fraction", summary_key("avg_accuracy")),
    Column("worst_accuracy", "Worst acc", "fraction", summary_key("worst_accuracy")),
    Column("bottom10_accuracy", "Bottom-10% acc", "fraction", summary_key("bottom10_accuracy")),
    Column("std_accuracy", "Acc std", "fraction", summary_key("std_accuracy")),
    Column("jain_index", "Jain index", "fraction", summary_key("jain_index")),
    Column("bits_per_client", "Bits/client", "bits", summary_key("bits_per_client")),
]


def columns(summaries: Sequence[Summary]) -> list[Column]:
    return COLUMNS


# The paper's claims are about the tail, hence the worst client's curve beside the average.
TABLE = ReportTable("DMFL-SQ family (Table II columns)", columns, worst_plot=True,
                    rows=("dmfl-sq", "choco-sgd", "dsgt", "qffl", "d-psgd"), position=1)
