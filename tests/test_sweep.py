"""`dfl-launch sweep`: a grid of runs that survives being killed, and one report of them all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import dfl_mesh
from tests.harness import ENV_ROOT, RING4, ROOT
from tests.proc_util import wait_for

SWEEP = """\
out: out
protocols: [d-psgd, dsgt]
topologies: [ring4.yaml]
seeds: 0-1
grid: {lr: [0.01, 0.05]}
settings: {rounds: 2, dataset: synthetic, partition: iid, eval_every: 1, transport: inproc}
"""


def sweep_cmd(path: Path) -> list[str]:
    return [sys.executable, "-m", "launcher.cli", "sweep", str(path), "--no-plots"]


def finished(out: Path) -> dict[Path, bytes]:
    """Run directory -> its summary.json bytes, for the runs that finished."""
    done = {}
    for path in out.rglob("summary.json"):
        if json.loads(path.read_text())["status"] == "ok":
            done[path.parent] = path.read_bytes()
    return done


def test_a_killed_sweep_run_again_finishes_the_rest_only(tmp_path: Path) -> None:
    (tmp_path / "ring4.yaml").write_text(RING4)
    spec = tmp_path / "sweep.yaml"
    spec.write_text(SWEEP)
    out = tmp_path / "out"
    first = subprocess.Popen(sweep_cmd(spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=ENV_ROOT, cwd=ROOT, start_new_session=True)
    try:
        wait_for(lambda: len(finished(out)) >= 3 or first.poll() is not None, 300,
                 "three finished runs")
        assert first.poll() is None, first.communicate()[1][-3000:]
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    before = finished(out)
    stamps = {run: (run / "summary.json").stat().st_mtime_ns for run in before}
    assert 3 <= len(before) < 8 and not (out / "report.md").exists()

    again = subprocess.run(sweep_cmd(spec), capture_output=True, text=True, timeout=600,
                           env=ENV_ROOT, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-3000:]
    after = finished(out)
    runs = {out / v / "ring4" / f"lr={lr}" / f"seed-{s}" for v in ("d-psgd", "dsgt")
            for lr in (0.01, 0.05) for s in (0, 1)}
    assert set(after) == runs
    for run, body in before.items():  # not redone: the same bytes, never rewritten
        assert after[run] == body and (run / "summary.json").stat().st_mtime_ns == stamps[run]
    last_lines = [line for line in again.stdout.splitlines() if line.startswith("run_dir: ")]
    assert sorted(Path(line.split()[1]) for line in last_lines) == sorted(runs - set(before))
    report = (out / "report.md").read_text()
    assert again.stdout.rstrip("\n").endswith(report.rstrip("\n"))
    for group in ("d-psgd lr=0.01", "d-psgd lr=0.05", "dsgt lr=0.01", "dsgt lr=0.05"):
        assert f"| {group} | 0, 1 |" in report


def test_the_api_sweep_and_its_refusals(tmp_path: Path) -> None:
    (tmp_path / "ring4.yaml").write_text(RING4)
    keys = {"out": tmp_path / "out", "protocols": ["d-psgd"],
            "topologies": [str(tmp_path / "ring4.yaml")], "seeds": "3-4",
            "settings": {"rounds": 1, "dataset": "synthetic", "transport": "inproc"}}
    result = dfl_mesh.sweep(**keys, progress=False, plots=False)
    assert result.exit_code == 0 and result.skipped == 0
    table = result.table
    assert list(table["seed"]) == [3, 4] and set(table["status"]) == {"ok"}
    assert [r.summary.seed for r in result.runs] == [3, 4]
    assert dfl_mesh.sweep(**keys, progress=False).skipped == 2
    changed = {**keys, "settings": {**keys["settings"], "rounds": 2}}
    with pytest.raises(dfl_mesh.InputError, match="holds a run with other inputs"):
        dfl_mesh.sweep(**changed, progress=False)
    with pytest.raises(dfl_mesh.InputError, match=r"d-psgd ring4 lr=-1 seed 3: --set lr=-1"):
        dfl_mesh.sweep(**{**keys, "grid": {"lr": [-1]}}, progress=False)
    with pytest.raises(dfl_mesh.InputError, match=r"seeds: .*0 <= A <= B"):
        dfl_mesh.sweep(**{**keys, "seeds": "4-3"}, progress=False)
