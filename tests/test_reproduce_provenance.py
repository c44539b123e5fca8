"""Which checkouts made a reproduction's runs (bench/reproduce/provenance.py): outputs written
today from runs kept since yesterday name both."""

from __future__ import annotations

import json
from pathlib import Path

from bench.reproduce.outputs import to_markdown
from bench.reproduce.provenance import STAMP, run_commits, stamp


def record(commit: str, made: list[str]) -> dict:
    return {"label": "Fig. 4", "paper": "p", "experiment": "fig4", "budget": "medium",
            "seeds": [0], "notes": [], "wall_seconds": 60.0, "commit": commit,
            "run_commits": made, "columns": [], "arms": [], "claims": [],
            "paper_numbers": [], "deviations": [], "inconsistencies": []}


def test_runs_finished_at_several_commits_are_all_named(tmp_path: Path) -> None:
    runs = [tmp_path / name for name in ("a", "b", "c", "d")]
    for run in runs:
        run.mkdir()
    stamp(runs[:2], "1" * 40)
    stamp(runs[2:3], "2" * 40)
    (runs[3] / STAMP).write_text("not json")
    assert run_commits(runs) == ["1" * 40, "2" * 40, "unknown"]
    assert run_commits(runs[:2]) == ["1" * 40]
    assert json.loads((runs[0] / STAMP).read_text()) == {"commit": "1" * 40}


def test_the_page_says_where_the_runs_were_made_when_not_at_the_outputs_commit() -> None:
    same = to_markdown(record("3" * 40, ["3" * 40]))
    assert "made at commit 333333333333" in same and "its runs at" not in same
    several = to_markdown(record("3" * 40, ["1" * 40, "2" * 40]))
    assert "made at commit 333333333333, its runs at 111111111111, 222222222222" in several
