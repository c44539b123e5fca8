"""`python -m bench.reproduce --backend slurm` on a real Slurm (tests/slurm_lab.py: slurmctld on
a login host, two slurmd hosts): a quick DMFL-SQ experiment's runs are jobs on the lab, a job
cancelled mid-run is resumed by the same command from its checkpoint, a finished run is never
run again, and every run ends with the bytes of the same experiment run locally.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.reproduce.__main__ import DATA_ROOT, main
from bench.reproduce.backend import for_backend
from bench.reproduce.recipes import RECIPES
from dfl_node.state import checkpoint_layout as checkpoint
from dfl_node.transports.liveness import STALL_ENV
from tests import slurm_lab
from tests.conftest import require
from tests.harness import ROOT, final_files
from tests.proc_util import wait_for

pytestmark = pytest.mark.slow

WAIT_S = 120  # a bound on an idle lab's state change, not an estimate
RUN_S = 900  # a bound on a quick experiment's runs on the lab, on a loaded 2-core machine
NODES = list(range(6))  # the quick budget's graphs have six nodes


@pytest.fixture(scope="module")
def lab() -> Iterator[slurm_lab.Cluster]:
    reason = slurm_lab.unavailable()
    require(reason is None, reason or "")
    require(DATA_ROOT.is_dir(), f"no CIFAR-10 at {DATA_ROOT}")
    # 3 CPUs a host: one six-task job at a time, so a second queued job waits in the queue
    with slurm_lab.cluster(nodes=2, cpus=3) as made:
        yield made
    assert slurm_lab.leftovers(made.root, made.net.prefix) == [], "the lab was not removed"


def reproduce(lab: slurm_lab.Cluster, out: Path, experiment: str, log: str,
              env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """The command on the login host, as a user there runs it; output in LAB/LOG (`env`
    reaches the jobs' tasks: sbatch exports the submitting environment)."""
    return lab.start([sys.executable, "-m", "bench.reproduce", "dmfl-sq", experiment,
                      "--budget", "quick", "--backend", "slurm", "--jobs", "2", "--out",
                      str(out)], lab.root / log, cwd=ROOT, env=env)


def run_dirs(out: Path, experiment: str, backend: str) -> dict[str, Path]:
    """Each of the experiment's methods -> its run directory under `backend`."""
    recipe = for_backend(RECIPES["dmfl-sq"].recipes("quick", out, str(DATA_ROOT))[experiment],
                         backend)
    return {arm.method: out / "runs" / arm.variant(recipe.common).name /
            Path(arm.topology).stem / "defaults" / "seed-0" for arm in recipe.arms}


def jobs_of(run: Path) -> list[str]:
    return sorted((p.name.removeprefix("slurm-").removesuffix(".out")
                   for p in run.glob("slurm-*.out")), key=int)


def stamp(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def test_a_cancelled_job_is_resumed_by_the_same_command_and_finished_runs_are_kept(
        lab: slurm_lab.Cluster, tmp_path: Path) -> None:
    """Fig. 4 (DMFL-SQ, D-PSGD) first; then Fig. 5, whose DMFL-SQ run is Fig. 4's and whose
    rho = 0 run is cancelled once every node has its round-1 checkpoint (node 0 holds round 2,
    so the cancel lands mid-run however fast the hosts are). The same command again finishes
    only that run, from round 1: it runs with node 0 held at round 1 for longer than the test
    waits, which a run started over would meet."""
    out = lab.root / "out"
    fig4 = reproduce(lab, out, "fig4", "fig4.log")
    log = lab.root / "fig4.log"
    assert fig4.wait(RUN_S) == 0, log.read_text()[-3000:]
    assert json.loads((out / "fig4.json").read_text())["experiment"] == "fig4"
    # both runs queued before either ended (--jobs 2), though the lab runs one at a time
    lines = log.read_text().splitlines()
    said = [i for i, line in enumerate(lines) if ": Slurm job " in line]
    ended = [i for i, line in enumerate(lines) if line.startswith("run_dir: ")]
    assert len(said) == len(ended) == 2 and max(said) < min(ended), lines
    # run directories as a local run's: dfl-report read them into the sweep's report
    report = (out / "runs" / "report.md").read_text()
    assert all(str(run) in report for run in run_dirs(out, "fig4", "slurm").values()), report
    runs = run_dirs(out, "fig5", "slurm")
    kept, cut = runs["DMFL-SQ"], runs["DMFL-SQ rho=0"]
    assert kept == run_dirs(out, "fig4", "slurm")["DMFL-SQ"]
    before = stamp(kept / "summary.json")
    (kept_job,) = jobs_of(kept)

    first = reproduce(lab, out, "fig5", "fig5.log", env={STALL_ENV: f"0:1:{RUN_S}"})
    wait_for(lambda: (cut / "plan.json").is_file()
             and checkpoint.last_complete_round(cut, NODES) >= 1, RUN_S,
             "a complete checkpoint of round 1")
    (cancelled,) = jobs_of(cut)
    lab.run(["scancel", cancelled])
    log = lab.root / "fig5.log"
    assert first.wait(WAIT_S) == 1, log.read_text()[-3000:]
    last = log.read_text().strip().splitlines()[-1]
    assert last.startswith("bench.reproduce: 1 of 2 runs failed") and str(cut) in last, last
    assert json.loads((cut / "summary.json").read_text())["status"] == "failed"
    assert not (out / "fig5.json").exists()
    wait_for(lambda: not lab.strays(), WAIT_S, "the job's processes gone from both hosts")
    wait_for(lambda: cancelled in {r.get("JobId") for r in lab.completed()}, WAIT_S,
             f"job {cancelled} recorded as ended")
    jobs = {r.get("JobId") for r in lab.completed()}

    again = reproduce(lab, out, "fig5", "again.log", env={STALL_ENV: f"0:0:{RUN_S}"})
    log = lab.root / "again.log"
    assert again.wait(RUN_S) == 0, log.read_text()[-3000:]
    queued = [line for line in log.read_text().splitlines() if ": Slurm job " in line]
    (resumed,) = jobs_of(cut)[1:]
    assert queued == [f"{cut.parts[-4]} ring6 seed 0: Slurm job {resumed} (resumed)"], queued
    wait_for(lambda: {r.get("JobId") for r in lab.completed()} - jobs == {resumed}, WAIT_S,
             f"job {resumed}, and no other, recorded as ended")
    assert stamp(kept / "summary.json") == before and jobs_of(kept) == [kept_job]
    assert json.loads((cut / "summary.json").read_text())["status"] == "ok"
    record = json.loads((out / "fig5.json").read_text())
    assert [a["method"] for a in record["arms"]] == ["DMFL-SQ", "DMFL-SQ rho=0"]
    assert (out / "fig5.png").stat().st_size > 1000 and (out / "fig5.md").is_file()
    assert not (cut / "checkpoints").exists()  # a finished run's go
    wait_for(lambda: not lab.strays(), WAIT_S, "the job's processes gone from both hosts")

    local = tmp_path / "local"
    assert main(["dmfl-sq", "fig5", "--budget", "quick", "--out", str(local)]) == 0
    for method, run in run_dirs(local, "fig5", "local").items():
        assert {f"node-{i}.safetensors" for i in NODES} <= set(final_files(runs[method]))
        assert final_files(runs[method]) == final_files(run), method
