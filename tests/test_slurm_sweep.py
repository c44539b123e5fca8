"""A sweep's runs as Slurm jobs (launcher/slurm/sweep.py) without a cluster: what is refused
before anything is queued, and what Ctrl-C cancels. (tests/test_reproduce_slurm.py runs a
reproduction's sweeps on a real Slurm.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from launcher.errors import LaunchError
from launcher.run.resume import INPUTS_FILE, SLURM_KEY, record_inputs
from launcher.slurm import commands
from launcher.slurm.sweep import Following, SlurmSweep, preflight
from launcher.sweep.grid import Point, points
from launcher.sweep.runner import run_sweep
from launcher.sweep.spec import SweepSpec, from_mapping
from tests.harness import RING4


def one_run(tmp_path: Path) -> SweepSpec:
    (tmp_path / "ring4.yaml").write_text(RING4)
    return from_mapping({"out": tmp_path / "out", "protocols": ["d-psgd"],
                         "topologies": [str(tmp_path / "ring4.yaml")],
                         "settings": {"rounds": 2, "dataset": "synthetic"}})


def interrupt(point: Point, on_slurm: bool) -> Path:
    """The run's directory as an interrupted run leaves it: its inputs and its plan (a Slurm
    run's inputs also name what its job asked for)."""
    run = point.run_dir
    run.mkdir(parents=True)
    record_inputs(run, point.request)
    if on_slurm:
        body = json.loads((run / INPUTS_FILE).read_text())
        (run / INPUTS_FILE).write_text(json.dumps({**body, SLURM_KEY: {"time": "01:00:00"}}))
    (run / "plan.json").write_text("{}")
    return run


def test_a_run_interrupted_here_is_refused_and_one_interrupted_on_slurm_taken_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local plan names its nodes' hosts, a Slurm job's discovers them, and a node refuses a
    checkpoint of another plan: a run resumes where it started."""
    grid = points(one_run(tmp_path))
    run = interrupt(grid[0], on_slurm=False)
    with pytest.raises(LaunchError, match=rf"^{run}: a run interrupted on this machine; finish "
                                          "it here"):
        preflight(grid, SlurmSweep())
    shutil.rmtree(run)
    interrupt(grid[0], on_slurm=True)  # still this sweep's run: its inputs are the same
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # so the next refusal is the last one
    with pytest.raises(LaunchError, match=r"^Slurm's client commands sbatch, squeue, scancel, "
                                          r"sinfo: not found"):
        preflight(grid, SlurmSweep())


def test_a_run_interrupted_on_slurm_is_not_resumed_here(tmp_path: Path) -> None:
    spec = one_run(tmp_path)
    run = interrupt(points(spec)[0], on_slurm=True)
    with pytest.raises(LaunchError, match=rf"^{run}: a run interrupted on Slurm; finish it "
                                          "there"):
        run_sweep(spec, progress=False, plots=False)
    assert not (run / "summary.json").exists()


def test_ctrl_c_cancels_the_jobs_followed_and_any_queued_after_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cancelled: list[str] = []
    monkeypatch.setattr(commands, "cancel", cancelled.append)
    following = Following()
    with following.follow("7") as going:
        assert going
        following.stop()
        assert cancelled == ["7"]
    with following.follow("8") as going:  # its sbatch answered after the Ctrl-C
        assert not going
    assert cancelled == ["7", "8"] and not following.jobs


def test_bad_sweep_options_are_refused_before_slurm_is_asked(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match=r"^--jobs: must be at least 1, got 0$"):
        preflight(points(one_run(tmp_path)), SlurmSweep(jobs=0))
