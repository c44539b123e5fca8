"""The SSD-FL family's table in `dfl-report` (the paper's Sec. VI, Tables I-II): the final
mean accuracy and the cycles to each accuracy threshold the runs were configured with
(`cycle_metrics.thresholds`).

Its members (SSD-FL, SDFL, PDFL, STC, CSTC) name it as their `report_family`.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocols.describe import Column, ReportTable, Summary, cycles, names_in, summary_key


def columns(summaries: Sequence[Summary]) -> list[Column]:
    thresholds = sorted(names_in(summaries, "cycles_to_threshold"), key=float)
    return [Column("avg_accuracy", "Final acc", "fraction", summary_key("avg_accuracy")),
            *(Column(f"cycles_to_{t}", f"Cycles to {t}", "cycles",
                     cycles(t)) for t in thresholds)]


TABLE = ReportTable("SSD-FL family (final accuracy, cycles to threshold)", columns,
                    rows=("ssd-fl", "sdfl", "pdfl", "stc", "cstc"), position=2)
