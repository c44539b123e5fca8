"""The Slurm client commands `dfl-launch slurm` uses, each as one call with one-line failures.

Only the documented, stable outputs are read (`sinfo -o`, `squeue -o`, `sbatch --parsable`,
`scontrol show config`'s KEY = VALUE lines), so any Slurm from 20.x on works, and a cluster the
submit host cannot reach is one line of bad input before anything is submitted.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from collections.abc import Sequence

from dfl_node.comm.routes import route_source
from launcher.errors import LaunchError

COMMAND_TIMEOUT_S = 60
CONTROLLER_PORT = 6817  # only picks the route to the controller; nothing is sent
# A job that has not ended: squeue's long state names (squeue -t all lists ended ones too).
ACTIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED",
                    "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING",
                    "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"})
# What submitting and following a job calls (scontrol only helps find the submit host's address).
CLIENTS = ("sbatch", "squeue", "scancel", "sinfo")
CONTROLLER = re.compile(r"^SlurmctldHost\[0\]\s*=\s*([^\s(]+)(?:\(([^)]+)\))?", re.M)


def slurm(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    """A client command; a LaunchError naming it when it is missing or (with `check`) fails."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S)
    except FileNotFoundError:
        raise LaunchError(f"{argv[0]}: not found; dfl-launch slurm --submit runs Slurm's client "
                          "commands on this host") from None
    except subprocess.TimeoutExpired:
        raise LaunchError(f"{argv[0]}: no answer within {COMMAND_TIMEOUT_S} s") from None
    if check and done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        raise LaunchError(f"{argv[0]}: {lines[-1]}")
    return done


def require_clients() -> None:
    """A LaunchError naming every client command missing here: a command line that will submit
    many jobs says so before the first, not when a later one needs scancel."""
    missing = [name for name in CLIENTS if shutil.which(name) is None]
    if missing:
        raise LaunchError(f"Slurm's client commands {', '.join(missing)}: not found on this "
                          "host (PATH); submitting runs to Slurm needs them here")


def controller() -> str | None:
    """The Slurm controller's address (or name) from `scontrol show config`; None when there
    is no Slurm to ask."""
    try:
        done = slurm(["scontrol", "show", "config"], check=False)
    except LaunchError:
        return None
    found = CONTROLLER.search(done.stdout) if done.returncode == 0 else None
    return (found.group(2) or found.group(1)) if found else None


def submit_host() -> str:
    """Where the tasks reach this host: the address of the interface that routes to the
    controller (the compute nodes reach the controller, so they share that network), else
    the host name."""
    ctl = controller()
    if ctl is not None:
        try:
            return route_source(ctl, CONTROLLER_PORT)
        except OSError:
            pass
    return socket.gethostname()


def partition_cpus(partition: str | None) -> tuple[str, int]:
    """(name, CPUs in all) of `partition`, or of the cluster's default partition when None."""
    out = slurm(["sinfo", "-h", "-o", "%P %C"]).stdout
    cpus: dict[str, int] = {}
    default = None
    for line in out.splitlines():
        words = line.split()
        if len(words) != 2:
            continue
        name = words[0].rstrip("*")
        default = name if words[0].endswith("*") else default
        cpus[name] = cpus.get(name, 0) + int(words[1].split("/")[-1])
    chosen = partition if partition is not None else default
    if chosen is None:
        raise LaunchError("--slurm-partition: the cluster has no default partition; name one")
    if chosen not in cpus:
        raise LaunchError(f"--slurm-partition: no partition {chosen!r} (the cluster has "
                          f"{', '.join(sorted(cpus)) or 'none'})")
    return chosen, cpus[chosen]


def submit(script: str) -> str:
    """The job id sbatch gives `script`."""
    return slurm(["sbatch", "--parsable", script]).stdout.strip().split(";")[0]


def job_state(job: str) -> str | None:
    """The job's state (RUNNING, COMPLETED, CANCELLED, ...); None once Slurm has forgotten it."""
    done = slurm(["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"], check=False)
    state = done.stdout.strip()
    return state if done.returncode == 0 and state else None


def cancel(job: str) -> None:
    slurm(["scancel", job], check=False)
