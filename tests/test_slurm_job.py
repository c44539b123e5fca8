"""`dfl-launch slurm -o DIR` without a cluster: the discover plan, the batch script that asks
Slurm for one task per node, and the options refused before anything is written or submitted.
(tests/test_slurm_submit.py runs the script on a real Slurm.)"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from dfl_node.plan import RunPlan
from launcher.config.slurm_job import Resources, check_fits
from launcher.errors import LaunchError
from launcher.node_cli import node_from_env
from tests.harness import in_process

RUN = ("--dataset", "synthetic", "--rounds", "2")


def topology(tmp_path: Path, ids: tuple[int, ...] = (0, 1, 2, 3, 4, 5)) -> str:
    """A ring over `ids`, no host or port anywhere."""
    edges = [[a, b] for a, b in zip(ids, ids[1:] + ids[:1], strict=True)]
    path = tmp_path / "ring.yaml"
    path.write_text(json.dumps({"name": "ring", "nodes": [{"id": i} for i in ids],
                                "edges": edges}))
    return str(path)


def slurm(tmp_path: Path, *args: str, ids: tuple[int, ...] = (0, 1, 2, 3, 4, 5),
          out: str = "job") -> tuple[int, str, str]:
    done = in_process("dfl-launch", "slurm", "--topology", topology(tmp_path, ids), "--protocol",
                      "d-psgd", *RUN, "--collector-host", "10.9.8.7", *args, "-o",
                      str(tmp_path / out))
    return done.code, done.out, done.err


def directives(script: str) -> dict[str, str]:
    pairs = [line.removeprefix("#SBATCH ").split("=", 1) for line in script.splitlines()
             if line.startswith("#SBATCH ")]
    return dict((k, v) for k, v in pairs)


def test_the_script_asks_for_one_task_per_node_and_runs_them_with_srun(tmp_path: Path) -> None:
    code, out, err = slurm(tmp_path)
    assert code == 0, err
    job = tmp_path / "job"
    script = (job / "job.sh").read_text()
    assert script.startswith("#!/bin/sh\n")
    assert directives(script) == {
        "--job-name": "dfl-d-psgd-ring", "--ntasks": "6", "--cpus-per-task": "1",
        "--time": "01:00:00", "--output": f"{job}/slurm-%j.out"}
    (srun,) = [shlex.split(line) for line in script.splitlines() if line.startswith("srun ")]
    assert srun == ["srun", "--kill-on-bad-exit=1", "--ntasks=6", sys.executable, "-m",
                    "launcher.node_cli", "--plan", f"{job}/plan.json", "--node-id-from-env",
                    "SLURM_PROCID", "--out", str(job)]
    assert out.startswith(f"sbatch {job}/job.sh")


def test_the_plan_is_a_discover_plan_with_its_services_on_the_collector_host(
        tmp_path: Path) -> None:
    assert slurm(tmp_path)[0] == 0
    plan = RunPlan.load(tmp_path / "job" / "plan.json")
    assert {(n.address, n.host) for n in plan.nodes} == {("", "")}
    assert plan.collector.startswith("tcp://10.9.8.7:")
    assert plan.discovery["address"].startswith("tcp://10.9.8.7:")
    assert plan.discovery["address"] != plan.collector


def test_every_resource_option_becomes_its_directive(tmp_path: Path) -> None:
    code, _, err = slurm(tmp_path, "--cpus-per-task", "2", "--mem-per-cpu", "2G", "--time",
                         "1-02:00", "--slurm-partition", "gpu-a100", "--account", "proj.42")
    assert code == 0, err
    got = directives((tmp_path / "job" / "job.sh").read_text())
    assert {k: got[k] for k in ("--cpus-per-task", "--mem-per-cpu", "--time", "--partition",
                                "--account")} == {
        "--cpus-per-task": "2", "--mem-per-cpu": "2G", "--time": "1-02:00",
        "--partition": "gpu-a100", "--account": "proj.42"}


@pytest.mark.parametrize(("args", "needle"), [
    (("--time", "1h"), "--time: expected minutes, HH:MM:SS or D-HH:MM:SS, got '1h'"),
    (("--mem-per-cpu", "lots"), "--mem-per-cpu: expected a size such as 4096 or 4G"),
    (("--cpus-per-task", "0"), "--cpus-per-task: must be at least 1, got 0"),
    (("--slurm-partition", "a;rm -rf"), "--slurm-partition: not a Slurm name"),
    (("--account", "a b"), "--account: not a Slurm name"),
    (("--secure",), "endpoints.nodes=discover: --secure is not supported yet"),
    (("--seeds", "0-1"), "--seeds: one node runs one seed"),
    (("--transport", "inproc"), "--transport: dfl-node runs over zmq"),
])
def test_bad_options_are_one_line_exit_2_and_nothing_written(
        tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    code, _, err = slurm(tmp_path, *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and needle in lines[0], err
    assert not (tmp_path / "job" / "job.sh").exists()


def test_a_directory_with_results_is_not_overwritten(tmp_path: Path) -> None:
    assert slurm(tmp_path)[0] == 0
    assert slurm(tmp_path, "--time", "30")[0] == 0  # written, not run: rewritten
    assert directives((tmp_path / "job" / "job.sh").read_text())["--time"] == "30"
    (tmp_path / "job" / "summary.json").write_text("{}")
    code, _, err = slurm(tmp_path)
    assert code == 2 and "holds a run's results; pick another directory" in err


def test_a_run_larger_than_the_partition_is_refused(tmp_path: Path) -> None:
    assert slurm(tmp_path)[0] == 0
    plan = RunPlan.load(tmp_path / "job" / "plan.json")
    check_fits(plan, Resources(cpus_per_task=2), "lab", 12)
    with pytest.raises(LaunchError, match=r"the run needs 6 tasks x 2 CPU\(s\) = 12 CPUs at "
                                          r"once; partition lab has 11"):
        check_fits(plan, Resources(cpus_per_task=2), "lab", 11)


def test_a_task_runs_the_node_at_its_rank_in_the_plan(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert slurm(tmp_path, ids=(10, 3, 7))[0] == 0
    plan = tmp_path / "job" / "plan.json"
    for rank, node in enumerate((3, 7, 10)):
        monkeypatch.setenv("RANK_UNDER_TEST", str(rank))
        assert node_from_env(plan, "RANK_UNDER_TEST") == node
    for bad in ("3", "-1", "x"):
        monkeypatch.setenv("RANK_UNDER_TEST", bad)
        with pytest.raises(LaunchError, match=r"--node-id-from-env RANK_UNDER_TEST: expected "
                                              r"an index 0\.\.2 of the plan's nodes"):
            node_from_env(plan, "RANK_UNDER_TEST")


def test_dfl_node_without_the_variable_is_one_line_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert slurm(tmp_path)[0] == 0
    monkeypatch.delenv("SLURM_PROCID", raising=False)
    done = in_process("dfl-node", "--plan", str(tmp_path / "job" / "plan.json"),
                      "--node-id-from-env", "SLURM_PROCID")
    assert done.code == 2
    assert done.err.strip() == ("dfl-node: --node-id-from-env SLURM_PROCID: expected an index "
                                "0..5 of the plan's nodes, got None")
