"""One host's plan for `dfl-node`: the same plan on every host.

`dfl-node --topology T --protocol P ...` resolves the plan with the launcher's own code, so it
equals `dfl-launch plan` with the same options. What differs is that nothing may be claimed:
a free port picked here would differ from the one picked on the next host, so every node's port
must come from the topology and every service of the run from `endpoints`. Then each host
resolves the same plan on its own (the agreement at start-up checks that it did).

`dfl-node --plan plan.json` takes a plan made elsewhere; this host then decodes its own copy of
the dataset into its cache when it has none (launcher/data/prepare.py, `ensure_host_data`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dfl_node.plan import RunPlan
from launcher.config.backend_catalog import check_hosts_transport
from launcher.config.endpoints import fixed_endpoint
from launcher.config.inputs import resolve_inputs
from launcher.config.keys import secure_plan
from launcher.config.planner import build_plan
from launcher.config.ports import PortClaims
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from protocols.registry import PROTOCOLS
from topologies.model import Topology


class NoClaims(PortClaims):
    """Claims nothing: a host that picked a free port would resolve a plan of its own."""

    def claim(self, count: int, host: str = "127.0.0.1") -> list[int]:
        if count:
            raise LaunchError("one node per host needs fixed addresses, but the plan needs "
                              f"{count} more port(s)")
        return []


def services(protocol: str) -> list[str]:
    """The services a protocol's mesh connects to besides its nodes."""
    spec = PROTOCOLS[protocol]
    return ["collector", *(["coordinator"] if spec.needs_prephase else []),
            *(["aggregator"] if spec.server_based else [])]


def check_fixed(topology: Topology, config: dict[str, Any]) -> None:
    """Every address of the run is fixed (with discovery, the directory's instead of the
    nodes'), or a LaunchError naming the first that is not."""
    discover = config["endpoints"].get("nodes") == "discover"
    loose = [n.id for n in topology.nodes if n.port is None]
    if loose and not discover:
        raise LaunchError(f"topology {topology.name}: nodes {loose} have no port; one node per "
                          "host needs every node's host and port in the topology")
    for service in [*services(config["protocol"]), *(["directory"] if discover else [])]:
        if fixed_endpoint(config, service) is None:
            raise LaunchError(f"endpoints.{service}: one node per host needs its host:port "
                              f"(--set endpoints.{service}=HOST:PORT)")


# Gives every node and service its address (launcher/backends/compose.py: the containers' names).
Placement = Callable[[Topology, dict[str, Any]], tuple[Topology, dict[str, Any]]]


def resolve_host_plan(req: RunSpec, place: Placement | None = None) -> RunPlan:
    """The plan every host resolves alike from the same topology and options (with `place`,
    from the topology and config it returns)."""
    return resolve_host_run(req, place)[1]


def resolve_host_run(req: RunSpec, place: Placement | None = None,
                     ) -> tuple[dict[str, Any], RunPlan]:
    """The resolved config and the plan of `resolve_host_plan`: a launcher that collects the
    run (`dfl-launch slurm --submit`) keeps the config in the run directory, as a local launch
    does, for `dfl-report` and `RunResult.config` to read."""
    if req.seeds:
        raise LaunchError("--seeds: one node runs one seed; start one mesh per seed")
    check_hosts_transport(req.options.transport)
    topology, config = resolve_inputs(req)
    if place is not None:
        topology, config = place(topology, config)
    check_fixed(topology, config)
    plan = build_plan(topology, config, NoClaims(),
                      aggregator=PROTOCOLS[config["protocol"]].server_based)
    return config, secure_plan(plan, config, None)


def check_place(plan: RunPlan, out_dir: Path) -> None:
    """A LaunchError if `out_dir` holds another run's plan."""
    path = out_dir / "plan.json"
    if path.exists() and RunPlan.load(path).section_hashes() != plan.section_hashes():
        raise LaunchError(f"{path}: holds another run's plan; pick another --out")


def place_plan(plan: RunPlan, out_dir: Path) -> None:
    """This host's run directory with the plan in it (the plan says which run it is)."""
    check_place(plan, out_dir)
    path = out_dir / "plan.json"
    (out_dir / "final").mkdir(parents=True, exist_ok=True)
    if not path.exists():
        plan.dump(path)
