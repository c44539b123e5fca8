"""`dfl-launch slurm --submit`, first: the job in the queue before the plan exists.

Slurm takes a second or more to start a job, and each host's server then spends seconds
importing torch and the runtime (launcher/slurm/host_server.py). The launcher's own imports
and plan take as long again. Queued from what the options and the topology file alone say,
the job starts and its hosts warm up while the launcher resolves the plan, instead of after:
the servers wait for DIR/steps/plan.ready, which the launcher makes once the plan is written.
So this module, and everything `dfl-launch slurm --submit` runs before sbatch, imports no
torch, nor numpy and networkx (a third of a second: the topology loader reads a file without
them), so that sbatch runs a quarter of a second after the command starts.

Whatever can refuse a run without its plan is checked before the job is queued: the resource
options, the topology file, the protocol's name, the transport, the run directory's lock (one
launcher per run directory, as for a local run: a second submission or `--resume` into it is
refused while the first is collecting), the partition's size, the run directory.
What only the plan can refuse (a config value, the data) comes after: the job is cancelled
then, before any node started, and the refusal is the same one line and exit 2
(launcher/slurm/submit.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from dfl_config.plugins import PROTOCOLS_GROUP, registered
from launcher.config.backend_catalog import check_hosts_transport
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from launcher.run.lock import RunLock, lock_made
from launcher.slurm import commands
from launcher.slurm.job import (
    PLAN,
    JobShape,
    Resources,
    check_fits,
    collector_by_hand,
    job_name,
    prepare_run_dir,
    write_script,
)
from topologies.errors import TopologyError
from topologies.loader import load_topology, resolve_topology_path


@dataclass(frozen=True)
class Queued:
    """A job sbatch accepted, for the run in `run_dir`, and the shape it was given."""

    job: str
    run_dir: Path
    shape: JobShape
    lock: RunLock
    """The run directory's, held until the run is collected (`release` then)."""


def early_shape(req: RunSpec, run_dir: Path) -> JobShape:
    """The job's name and tasks from the topology file and the protocol's name: one task per
    node of the topology (a server-based protocol's aggregator is a node beyond them, run on
    the submit host). Of the services, only the collector is known yet."""
    if not req.topology:
        raise LaunchError("--topology is required")
    if not req.protocol:
        raise LaunchError("--protocol is required")
    known = registered(PROTOCOLS_GROUP)
    if req.protocol not in known:
        raise LaunchError(f"--protocol: unknown protocol {req.protocol!r} (known: "
                          f"{', '.join(sorted(known))})")
    check_hosts_transport(req.options.transport)
    try:
        topology = load_topology(resolve_topology_path(req.topology))
    except TopologyError as exc:
        raise LaunchError(str(exc)) from None
    return JobShape(job_name(req.protocol, topology.name), topology.ids,
                    (tuple(collector_by_hand(run_dir / PLAN, run_dir)),))


def queue(req: RunSpec, resources: Resources, out: Path, resuming: bool = False) -> Queued:
    """Check what can be checked without the plan, write DIR/job.sh and submit it."""
    resources.check()
    run_dir = out.absolute()
    shape = early_shape(req, run_dir)
    lock = lock_made(run_dir, "-o")
    try:
        check_fits(len(shape.tasks), resources,
                   *commands.partition_cpus(resources.partition))
        run_dir = prepare_run_dir(out, resuming)
        script = write_script(shape, resources, run_dir, sys.executable)
        lock.mark()
        return Queued(commands.submit(str(script)), run_dir, shape, lock)
    except BaseException:
        lock.release()
        raise
