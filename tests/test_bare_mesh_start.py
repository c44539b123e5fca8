"""The bare mesh's start, bench/startup.py's reference: a one-round run says when its last node
was past its first exchange (a Unix time; nan when no node ended a round)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from bench.bare_mesh import run, write_plan
from topologies.generators import ring
from topologies.writer import write_topology


def test_one_round_reports_when_the_last_node_was_past_its_first_exchange(tmp_path: Path) -> None:
    topology = tmp_path / "ring3.yaml"
    write_topology(ring(3), topology)
    plan = write_plan(tmp_path / "bare.json", {"name": "linear"}, topology, 1)
    done = run(json.loads(plan.read_text()))
    assert set(done["round_seconds"]) == {"0"}
    assert math.isfinite(done["first_exchange_at"])
