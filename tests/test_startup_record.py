"""When the mesh began training: each node's `first_round_began_at` and the summary's
`first_round_start_seconds` (bench/startup.py measures start-up from the command with them)."""

from __future__ import annotations

import time
from pathlib import Path

from launcher.run.summary import first_round_seconds
from tests.harness import launch_ok

HEX6 = """\
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}, {id: 4}, {id: 5}]
edges: [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 0]]
"""


def test_the_last_node_to_begin_counts() -> None:
    done = {0: {"first_round_began_at": 104.0}, 1: {"first_round_began_at": 106.5}, 2: {}}
    assert first_round_seconds(done, 100.0, "first_round_began_at") == 6.5
    assert first_round_seconds({0: {}}, 100.0, "first_round_began_at") is None


def test_a_run_records_when_its_first_round_began(tmp_path: Path) -> None:
    topology = tmp_path / "hex6.yaml"
    topology.write_text(HEX6)
    before = time.time()
    summary = launch_ok(tmp_path / "run", str(topology), "d-psgd", "--rounds", "2",
                        "--dataset", "synthetic", "--quiet")
    after = time.time()
    began = summary["first_round_start_seconds"]
    assert isinstance(began, float)
    assert 0 < began <= summary["first_round_seconds"]
    assert before < summary["started_at"] + began < after
