"""What a Slurm job of a plan asks for, and the batch script that asks for it.

One task per node of the plan (`srun` starts them all; SLURM_PROCID says which node a task is),
so the mesh spans whatever hosts Slurm gives, and the nodes find each other through the
directory beside the collector (`endpoints.nodes: discover`). Everything the job requests
follows from the plan and a few options, each with a default here, and the options are checked
before any script is written: a typo in a time limit should be exit 2 on the submit host, not a
job that sbatch refuses later. Kept free of any call to Slurm, so a script can be written and
tested where no cluster is.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from dfl_node.plan import RunPlan
from launcher.errors import LaunchError

DEFAULT_TIME = "01:00:00"
DEFAULT_CPUS_PER_TASK = 1
# sbatch's forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
TIME_FORMS = re.compile(r"\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+(:\d{1,2}){0,2}")
MEMORY = re.compile(r"[1-9]\d*[KMGT]?")
# What Slurm accepts in a partition or account name, short of anything a shell would read.
NAME = re.compile(r"[A-Za-z0-9_.+-]+")


@dataclass(frozen=True)
class Resources:
    """What one job asks Slurm for besides its tasks (one per node of the plan)."""

    cpus_per_task: int = DEFAULT_CPUS_PER_TASK
    mem_per_cpu: str | None = None  # a Slurm size (4096, 4G); None: the cluster's default
    time: str = DEFAULT_TIME
    partition: str | None = None  # None: the cluster's default partition
    account: str | None = None  # None: the user's default account

    def check(self) -> None:
        """Each option as Slurm would take it, or a LaunchError naming the first that is not."""
        if self.cpus_per_task < 1:
            raise LaunchError(f"--cpus-per-task: must be at least 1, got {self.cpus_per_task}")
        if not TIME_FORMS.fullmatch(self.time):
            raise LaunchError(f"--time: expected minutes, HH:MM:SS or D-HH:MM:SS, got "
                              f"{self.time!r}")
        if self.mem_per_cpu is not None and not MEMORY.fullmatch(self.mem_per_cpu):
            raise LaunchError(f"--mem-per-cpu: expected a size such as 4096 or 4G (megabytes "
                              f"unless K, M, G or T), got {self.mem_per_cpu!r}")
        for flag, value in (("--slurm-partition", self.partition), ("--account", self.account)):
            if value is not None and not NAME.fullmatch(value):
                raise LaunchError(f"{flag}: not a Slurm name: {value!r}")


def cpus_needed(plan: RunPlan, resources: Resources) -> int:
    return len(plan.ids) * resources.cpus_per_task


def check_fits(plan: RunPlan, resources: Resources, partition: str, cpus: int) -> None:
    """Refuse a run whose tasks cannot all run at once on `partition` (`cpus` CPUs in all):
    the nodes of a mesh wait for each other, so a job that Slurm would start part by part
    would never finish."""
    need = cpus_needed(plan, resources)
    if need > cpus:
        raise LaunchError(f"the run needs {len(plan.ids)} tasks x {resources.cpus_per_task} "
                          f"CPU(s) = {need} CPUs at once; partition {partition} has {cpus} "
                          "(fewer nodes, or a smaller --cpus-per-task)")


def job_name(plan: RunPlan) -> str:
    return f"dfl-{plan.protocol}-{plan.topology_name}"


def node_command(python: str, plan_path: Path, run_dir: Path) -> list[str]:
    """What every task runs: the node whose index in the plan is its SLURM_PROCID."""
    return [python, "-m", "launcher.node_cli", "--plan", str(plan_path),
            "--node-id-from-env", "SLURM_PROCID", "--out", str(run_dir)]


def batch_script(plan: RunPlan, resources: Resources, plan_path: Path, run_dir: Path,
                 python: str) -> str:
    """The sbatch script: the job's request in #SBATCH lines, then one srun of all the nodes.
    `--kill-on-bad-exit` ends the step when a node fails: its neighbours would otherwise wait
    out their deadlines in an allocation that is being paid for."""
    lines = ["#!/bin/sh",
             f"#SBATCH --job-name={job_name(plan)}",
             f"#SBATCH --ntasks={len(plan.ids)}",
             f"#SBATCH --cpus-per-task={resources.cpus_per_task}",
             f"#SBATCH --time={resources.time}",
             f"#SBATCH --output={run_dir / 'slurm-%j.out'}"]
    if resources.mem_per_cpu is not None:
        lines.append(f"#SBATCH --mem-per-cpu={resources.mem_per_cpu}")
    if resources.partition is not None:
        lines.append(f"#SBATCH --partition={resources.partition}")
    if resources.account is not None:
        lines.append(f"#SBATCH --account={resources.account}")
    command = shlex.join(node_command(python, plan_path, run_dir))
    collect = shlex.join(["dfl-launch", "collect", "--plan", str(plan_path), "--out",
                          str(run_dir)])
    lines += ["# Written by dfl-launch slurm: one task per node of the plan. The nodes learn each",
              "# other's addresses from the directory beside the collector, which",
              "# `dfl-launch slurm --submit` runs (for this script submitted by hand:",
              f"# {collect}).",
              f"srun --kill-on-bad-exit=1 --ntasks={len(plan.ids)} {command}"]
    return "\n".join(lines) + "\n"
