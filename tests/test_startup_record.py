"""When the mesh began training: each node's `first_round_began_at` and the summary's
`first_round_start_seconds` (bench/startup.py measures start-up from the command with them)."""

from __future__ import annotations

from pathlib import Path

from dfl_node.runner.records import DoneRecord
from launcher.run.summary import first_round_seconds
from tests.harness import launch_ok


def test_the_last_node_to_begin_counts() -> None:
    done = {0: DoneRecord(node=0, ledger={}, first_round_began_at=104.0),
            1: DoneRecord(node=1, ledger={}, first_round_began_at=106.5),
            2: DoneRecord(node=2, ledger={})}
    assert first_round_seconds(done, 100.0, "first_round_began_at") == 6.5
    assert first_round_seconds({0: done[2]}, 100.0, "first_round_began_at") is None


def test_a_run_records_when_its_first_round_began(tmp_path: Path, hex6: str) -> None:
    run = tmp_path / "run"
    summary = launch_ok(run, hex6, "d-psgd", "--rounds", "2", "--dataset", "synthetic",
                        "--quiet")
    began = summary["first_round_start_seconds"]
    assert isinstance(began, float)
    assert 0 < began <= summary["first_round_seconds"]
    # The recorded instant lies between the run directory's first file and its summary.
    assert (run / "plan.json").stat().st_mtime < summary["started_at"] + began \
        < (run / "summary.json").stat().st_mtime
