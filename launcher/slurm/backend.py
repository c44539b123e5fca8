"""`dfl-launch slurm ... -o DIR`: a plan and a batch script, one Slurm task per node.

Slurm picks the hosts when the job starts, so the plan names none: it is a discover plan
(`endpoints.nodes: discover`, dfl_node/runner/discovery.py) whose only fixed addresses are the
services on the submit host (the collector and the directory beside it, plus a pre-phase
coordinator or an aggregator where the protocol has one), at `--collector-host` (default: the
address of the interface that routes to the Slurm controller) and free ports of this host
unless `endpoints.*` fixes them. DIR is the run directory of every task and of the collector,
so it must be on a file system the compute nodes share (as the home or scratch directory of a
cluster is):

    DIR/plan.json      the plan
    DIR/job.sh         the batch script (launcher/slurm/job.py)
    DIR/slurm-<job>.out  the job's output, the nodes' logs among it
    DIR/steps/node-<id>.exit  each node's exit status, once it ended

`--submit` queues the job before it resolves the plan (launcher/slurm/queue.py), then writes
the plan, which the job's hosts wait for, and collects the run here (launcher/slurm/submit.py).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from dfl_node.plan import RunPlan
from launcher.backends.base import HandOffBackend
from launcher.config.backend_catalog import SLURM
from launcher.config.host_plan import resolve_host_run, services
from launcher.config.ports import PortClaims
from launcher.config.run_spec import RunSpec
from launcher.slurm.job import (
    PLAN,
    JobShape,
    Resources,
    prepare_run_dir,
    ready_file,
    write_script,
)
from topologies.model import Topology


class SlurmBackend(HandOffBackend):
    """A batch script Slurm starts the nodes from; the services listen on `host`. The ports
    it picks stay claimed until `close`, so a collector opened before then gets them."""

    spec = SLURM

    def __init__(self, resources: Resources, host: str) -> None:
        resources.check()
        self.resources = resources
        self.host = host
        self.claims = PortClaims()

    def place(self, topology: Topology, config: dict[str, Any]) -> tuple[Topology,
                                                                         dict[str, Any]]:
        """Discovery for the nodes; every service `endpoints` leaves open on this host."""
        endpoints = {**config["endpoints"], "nodes": "discover"}
        for name in [*services(config["protocol"]), "directory"]:
            if endpoints.get(name) is None:
                endpoints[name] = f"{self.host}:{self.claims.claim(1, '0.0.0.0')[0]}"
        return topology, {**config, "endpoints": endpoints}

    def resolve(self, req: RunSpec) -> RunPlan:
        return self.resolve_run(req)[1]

    def resolve_run(self, req: RunSpec) -> tuple[dict[str, Any], RunPlan]:
        """The resolved config and the discover plan; with GPUs per task, every node on
        `cuda:0`: Slurm binds each task its own GPUs and the task sees the first as device 0,
        whichever it is on the host (the submit host's GPUs, if any, do not matter)."""
        config, plan = resolve_host_run(req, self.place)
        if not self.resources.gpus_per_task:
            return config, plan
        return config, replace(plan, nodes=tuple(replace(n, device="cuda:0")
                                                 for n in plan.nodes))

    def hand_off(self, plan: RunPlan, out: Path, resuming: bool = False) -> Path:
        """Script and plan in `out` (launcher/slurm/job.py's prepare_run_dir)."""
        return self.complete(plan, prepare_run_dir(out, resuming))

    def complete(self, plan: RunPlan, run_dir: Path) -> Path:
        """The plan in `run_dir`, then its go-ahead for the job's hosts (which may be waiting
        for it: `--submit` queues the job first), and the script that lists what the plan runs
        beside the job (the queued one did not know yet)."""
        script = write_script(JobShape.of(plan, run_dir / PLAN, run_dir), self.resources,
                              run_dir, sys.executable)
        plan.dump(run_dir / PLAN)
        ready = ready_file(run_dir)
        ready.parent.mkdir(exist_ok=True)
        ready.touch()
        return script

    def close(self) -> None:
        self.claims.release()
