"""`eval_at_start`: a metrics row of round 0 (the untrained models, at 0 bits), so that a curve
against rounds or bits starts where training starts. Evaluation draws no random number, so the
run's models are the same with or without it; a run resumed from scratch reports round 0 once."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from dfl_node.plan import RunPlan
from launcher.run.resume import keep_rounds_through
from tests.harness import final_files, launch_ok
from tests.rings import ring_file
from tests.test_resume import SYNTH


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_round_zero_is_reported_and_changes_no_model(tmp_path: Path) -> None:
    ring = ring_file(tmp_path, 4)
    args = ("--rounds", "4", "--eval-every", "2", "--transport", "inproc", *SYNTH)
    launch_ok(tmp_path / "plain", ring, "d-psgd", *args)
    launch_ok(tmp_path / "start", ring, "d-psgd", *args, "--set", "eval_at_start=true")
    counts = Counter(r["round"] for r in rows(tmp_path / "start"))
    assert counts == {0: 4, 2: 4, 4: 4}
    assert Counter(r["round"] for r in rows(tmp_path / "plain")) == {2: 4, 4: 4}
    # every node starts from the same seeded model, so round 0 is one accuracy
    assert len({r["accuracy"] for r in rows(tmp_path / "start") if r["round"] == 0}) == 1
    assert final_files(tmp_path / "plain") == final_files(tmp_path / "start")
    plan = json.loads((tmp_path / "start" / "plan.json").read_text())
    plain = json.loads((tmp_path / "plain" / "plan.json").read_text())
    assert plan["eval_at_start"] and not plain["eval_at_start"]
    assert plan["hashes"]["protocol"] != plain["hashes"]["protocol"]
    # unset, it hashes as a plan written before the key existed (which a resume compares)
    del plain["eval_at_start"]
    assert RunPlan.from_dict(plain).section_hashes() == plain["hashes"]


def test_a_resume_from_scratch_keeps_no_round_zero_row(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"round": r, "node": n}) + "\n" for r in (0, 2, 4) for n in (0, 1)]
    path.write_text("".join(lines))
    keep_rounds_through(path, 2)
    assert path.read_text() == "".join(lines[:4])
    keep_rounds_through(path, 0)
    assert path.read_text() == ""
