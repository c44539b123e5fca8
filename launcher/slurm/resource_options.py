"""The options that say what a Slurm job asks for, declared once for every command line that
submits jobs (`dfl-launch slurm`, `python -m bench.reproduce --backend slurm`).

Each option is a field of `Resources` (launcher/slurm/job.py), and its default is that
field's default, so a second command line cannot drift from the first: the flag, its help and
its metavar are here, the value's type and default in the typed model. Kept free of click and
argparse alike: each command line builds its parser from this table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from launcher.slurm.job import Resources

DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(Resources)}


@dataclass(frozen=True)
class SlurmOption:
    """One flag of a command line that sets one field of `Resources` (None: a flag of its own
    beside them, as --collector-host)."""

    field: str | None
    flag: str
    help: str
    metavar: str | None = None

    @property
    def dest(self) -> str:
        """The parsed value's name: the flag's, since a field's own name may be taken
        (`partition` is the training data's in every run)."""
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def default(self) -> Any:
        return DEFAULTS[self.field] if self.field is not None else None

    @property
    def is_flag(self) -> bool:
        return isinstance(self.default, bool)

    @property
    def kind(self) -> type:
        """The type a value is parsed to (a flag's is bool; an optional field's, a string)."""
        return type(self.default) if self.default is not None else str


RESOURCE_OPTIONS = (
    SlurmOption("cpus_per_task", "--cpus-per-task", "CPUs of each task (one task per node)."),
    SlurmOption("mem_per_cpu", "--mem-per-cpu",
                "Memory per CPU, as sbatch takes it (4096, 4G); a task gets --cpus-per-task "
                "times this (default: the cluster's).", "SIZE"),
    SlurmOption("gpus_per_task", "--gpus-per-task",
                "GPUs Slurm binds to each task; every node then runs on cuda:0 as its task sees "
                "it (0: CPU)."),
    SlurmOption("time", "--time", "The job's time limit (minutes, HH:MM:SS, D-HH:MM:SS).",
                "LIMIT"),
    SlurmOption("partition", "--slurm-partition",
                "Slurm partition (default: the cluster's default partition; --partition is the "
                "training data's).", "NAME"),
    SlurmOption("account", "--account",
                "Slurm account to charge (default: your default account).", "NAME"),
    SlurmOption("step_per_node", "--step-per-node",
                "Run each node as its own job step, so that `scancel JOB.STEP` stops one node "
                "and sacct lists each; by default one step runs every node, which spares Slurm "
                "a step (an srun and a slurmstepd) per node."),
)
COLLECTOR_HOST = SlurmOption(
    None, "--collector-host",
    "Where the tasks reach this host's collector (default: the address of the interface that "
    "routes to the Slurm controller, else the host name).", "HOST")


def resources_of(values: Mapping[str, Any]) -> Resources:
    """The Resources that parsed options (by `dest`) ask for: an option not given (absent or
    None) keeps the field's default."""
    given = {o.field: values[o.dest] for o in RESOURCE_OPTIONS
             if o.field is not None and values.get(o.dest) is not None}
    return Resources(**given)
