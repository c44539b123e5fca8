"""`dfl-launch slurm --submit` on a real Slurm (tests/slurm_lab.py: slurmctld on a login host,
two slurmd hosts with their own network stacks and hostnames): the job's tasks are the mesh's
nodes on both hosts, they find each other through the collector's directory on the login host,
and the run equals the inproc run of the same plan bit for bit; a run too large for the
partition is refused before anything is submitted; Ctrl-C cancels the job; nothing the job
started is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dfl_node.state import checkpoint_layout as checkpoint
from dfl_node.transports.liveness import STALL_ENV
from tests import slurm_lab
from tests.conftest import require
from tests.harness import ROOT, final_files, launch_ok
from tests.proc_util import wait_for

pytestmark = pytest.mark.slow

WAIT_S = 120  # a bound on an idle lab's state change, not an estimate
RUN_S = 600  # a bound on a 6-node synthetic run of 2 rounds on a loaded 2-core machine
OPTIONS = ("--dataset", "synthetic", "--rounds", "2", "--set", "wire.rendezvous_s=300")


@pytest.fixture(scope="module")
def lab() -> Iterator[slurm_lab.Cluster]:
    reason = slurm_lab.unavailable()
    require(reason is None, reason or "")
    # 3 CPUs a host: six one-CPU tasks fill both, so both hosts run nodes
    with slurm_lab.cluster(nodes=2, cpus=3) as made:
        yield made
    assert slurm_lab.leftovers(made.root, made.net.prefix) == [], "the lab was not removed"


def ring6(folder: Path) -> str:
    path = folder / "ring6.yaml"
    edges = [[i, (i + 1) % 6] for i in range(6)] + [[0, 3]]
    path.write_text(json.dumps({"name": "ring6", "nodes": [{"id": i} for i in range(6)],
                                "edges": edges}))
    return str(path)


def start(lab: slurm_lab.Cluster, run: Path, *args: str, protocol: str = "d-psgd",
          env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`dfl-launch slurm --submit` on the login host, as a user there runs it (`env` reaches
    the tasks: sbatch exports the submitting environment); output in RUN.log."""
    return lab.start([sys.executable, "-m", "launcher.cli", "slurm", "--topology",
                      ring6(lab.root), "--protocol", protocol, *OPTIONS, "--quiet",
                      "--no-plots", *args, "--submit", "-o", str(run)],
                     run.parent / f"{run.name}.log", cwd=ROOT, env=env)


def submit(lab: slurm_lab.Cluster, run: Path, *args: str,
           protocol: str = "d-psgd") -> tuple[int, str]:
    """The exit code and output of a submitted run, once it ended."""
    code = start(lab, run, *args, protocol=protocol).wait(RUN_S)
    return code, (run.parent / f"{run.name}.log").read_text()


# SSD-FL: a pre-phase coordinator; q-FFL: an aggregator, both on the submit host with --submit
@pytest.mark.parametrize("protocol", ["d-psgd", "dmfl-sq", "ssd-fl", "qffl"])
def test_a_mesh_runs_on_both_hosts_and_equals_the_inproc_run(
        lab: slurm_lab.Cluster, tmp_path: Path, protocol: str) -> None:
    run = lab.root / protocol
    code, out = submit(lab, run, protocol=protocol)
    assert code == 0, f"{out}\n{lab.logs()}"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "ok"
    assert sorted({n["host"] for n in summary["nodes"] if n["id"] < 6}) == lab.nodes
    launch_ok(tmp_path / "inproc", ring6(tmp_path), protocol, "--transport", "inproc",
              *OPTIONS)
    assert {f"node-{i}.safetensors" for i in range(6)} <= set(final_files(run))
    assert final_files(run) == final_files(tmp_path / "inproc")
    job = job_of(run)
    wait_for(lambda: any(r.get("JobId") == job and r.get("JobState") == "COMPLETED"
                         and r.get("DerivedExitCode") == "0:0" for r in lab.completed()),
             WAIT_S, f"job {job} recorded as completed, every step with exit 0")
    wait_for(lambda: not lab.strays(), WAIT_S, "the job's processes gone from both hosts")
    wait_for(lambda: lab.node_states() == {"n1": "idle", "n2": "idle"}, WAIT_S,
             "both hosts idle again")


def test_a_run_too_large_for_the_partition_is_refused_before_submission(
        lab: slurm_lab.Cluster) -> None:
    jobs = len(lab.completed())
    code, out = submit(lab, lab.root / "large", "--cpus-per-task", "2")
    assert code == 2, out
    assert out.strip().splitlines()[-1] == (
        "dfl-launch: the run needs 6 tasks x 2 CPU(s) = 12 CPUs at once; partition lab has 6 "
        "(fewer nodes, or a smaller --cpus-per-task)")
    assert lab.run(["squeue", "-h"]).stdout.strip() == ""
    assert len(lab.completed()) == jobs
    assert not (lab.root / "large" / "job.sh").exists()


def test_input_only_the_plan_refuses_cancels_the_queued_job_in_one_line(
        lab: slurm_lab.Cluster) -> None:
    """--submit queues the job before it resolves the plan (launcher/slurm/queue.py), so a
    config value it refuses is found with the job already queued: the same one line and exit 2
    as for a local run, and the job cancelled before any node started."""
    before = {r.get("JobId") for r in lab.completed()}
    run = lab.root / "bad-value"
    code, out = submit(lab, run, "--set", "batch_size=-4")
    assert code == 2, out
    (last,) = out.strip().splitlines()
    assert last.startswith("dfl-launch: ") and "batch_size" in last, last
    wait_for(lambda: [(r.get("Name"), r.get("JobState")) for r in lab.completed()
                      if r.get("JobId") not in before] == [("dfl-d-psgd-ring6", "CANCELLED")],
             WAIT_S, "the queued job recorded as cancelled")
    wait_for(lambda: not lab.strays(), WAIT_S, "the job's processes gone from both hosts")
    assert not (run / "plan.json").exists() and not list((run / "final").iterdir())


def endless_run(lab: slurm_lab.Cluster, name: str, *args: str,
                ) -> tuple[subprocess.Popen[bytes], Path, str]:
    """A submitted run that would not end by itself, once its first evaluation is collected:
    the launcher on the login host, the run directory, the job id."""
    run = lab.root / name
    proc = start(lab, run, "--rounds", "50000", *args)  # under ring6's rounds ceiling
    metrics = run / "metrics.jsonl"
    wait_for(lambda: (metrics.exists() and metrics.read_text().strip()) or proc.poll() is not None,
             RUN_S, f"a first evaluation in {metrics}")
    assert proc.poll() is None, (run.parent / f"{name}.log").read_text()
    return proc, run, job_of(run)


def job_of(run: Path) -> str:
    (job,) = [p.name.removeprefix("slurm-").removesuffix(".out") for p in run.glob("slurm-*.out")]
    return job


def test_ctrl_c_cancels_the_job_and_keeps_what_was_collected(lab: slurm_lab.Cluster) -> None:
    proc, run, job = endless_run(lab, "interrupted")
    metrics = run / "metrics.jsonl"
    log = lab.root / "interrupted.log"
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends the terminal's foreground group
    assert proc.wait(WAIT_S) == 130, log.read_text()
    assert json.loads((run / "summary.json").read_text())["status"] == "interrupted"
    assert metrics.read_text().strip()
    wait_for(lambda: any(r.get("JobId") == job and r.get("JobState") == "CANCELLED"
                         for r in lab.completed()), WAIT_S, f"job {job} recorded as cancelled")
    wait_for(lambda: not lab.strays(), WAIT_S, "the job's processes gone from both hosts")


def test_a_job_at_its_time_limit_fails_the_run_naming_a_node(lab: slurm_lab.Cluster) -> None:
    proc, run, job = endless_run(lab, "timeout", "--time", "1")
    log = lab.root / "timeout.log"
    assert proc.wait(RUN_S) == 1, log.read_text()
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["status"], type(summary["failed_node"])) == ("failed", int)
    assert (run / "metrics.jsonl").read_text().strip()
    wait_for(lambda: any(r.get("JobId") == job and r.get("JobState") == "TIMEOUT"
                         for r in lab.completed()), WAIT_S, f"job {job} recorded as timed out")
    wait_for(lambda: not lab.strays(), WAIT_S, "the job's processes gone from both hosts")


def step_of(lab: slurm_lab.Cluster, job: str, node: int) -> str:
    """The id (JOB.STEP) of the job step that runs `node`."""
    out = lab.run(["squeue", "-h", "-s", "-j", job, "-o", "%i %j"]).stdout
    steps = dict(reversed(line.split()) for line in out.splitlines() if len(line.split()) == 2)
    return steps[f"node-{node}"]


def test_scancel_of_one_task_fails_the_run_naming_it_and_resume_completes_it(
        lab: slurm_lab.Cluster, tmp_path: Path) -> None:
    """Each node its own step, so that scancel reaches one (Slurm cancels steps, not tasks).
    Node 0 holds round 3 (busy, still answering heartbeats) so the cancel lands mid-run
    however fast the hosts are; the resumed job, without the hold, ends as the inproc run."""
    run, log = lab.root / "one-task", lab.root / "one-task.log"
    args = ("--rounds", "6", "--eval-every", "2", "--checkpoint-every", "2")
    proc = start(lab, run, *args, "--step-per-node", env={STALL_ENV: f"0:3:{RUN_S}"})
    wait_for(lambda: (run / "plan.json").is_file()
             and checkpoint.last_complete_round(run, list(range(6))) >= 2, RUN_S,
             "a complete checkpoint of round 2")
    job = job_of(run)
    lab.run(["scancel", step_of(lab, job, 3)])
    assert proc.wait(WAIT_S) == 1, log.read_text()
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["status"], summary["failed_node"]) == ("failed", 3), summary
    assert (run / "metrics.jsonl").read_text().strip()
    wait_for(lambda: not lab.strays(), WAIT_S, "the job's processes gone from both hosts")

    resumed = lab.start([sys.executable, "-m", "launcher.cli", "--resume", str(run), "--quiet",
                         "--no-plots"], lab.root / "resumed.log", cwd=ROOT)
    assert resumed.wait(RUN_S) == 0, (lab.root / "resumed.log").read_text()
    assert json.loads((run / "summary.json").read_text())["status"] == "ok"
    assert job_of_latest(run) != job
    launch_ok(tmp_path / "inproc", ring6(tmp_path), "d-psgd", "--transport", "inproc",
              *OPTIONS, *args)
    assert len(final_files(run)) == 6
    assert final_files(run) == final_files(tmp_path / "inproc")
    wait_for(lambda: not lab.strays(), WAIT_S, "the job's processes gone from both hosts")


def job_of_latest(run: Path) -> str:
    return max((p.name.removeprefix("slurm-").removesuffix(".out")
                for p in run.glob("slurm-*.out")), key=int)
