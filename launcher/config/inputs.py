"""What the user asked for (a RunSpec), resolved: the topology, the layered config, the plan.

Every check that can refuse a run happens here, before anything starts, so that bad input is
one line and exit 2 whichever command (`dfl-launch`, `dfl-node --topology`, `compose`) asked.
"""

from __future__ import annotations

from typing import Any

from dfl_node.plan import RunPlan
from launcher.config.capacity import check_capacity, check_node_ids, check_rounds
from launcher.config.checks import check_failure_policy
from launcher.config.layers import resolve_config
from launcher.config.ports import PortClaims
from launcher.config.run_settings import node_attributes_model
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from protocols.registry import protocol_spec
from topologies.errors import TopologyError
from topologies.loader import load_topology, resolve_topology_path
from topologies.model import Topology

Inputs = tuple[Topology, dict[str, Any]]
"""A request's topology and resolved config, validated (`resolve_inputs`)."""


def resolve(req: RunSpec, claims: PortClaims) -> tuple[dict[str, Any], RunPlan]:
    """Everything a run needs, or a LaunchError naming what is wrong."""
    return plan_inputs(req, resolve_inputs(req), claims)


def plan_inputs(req: RunSpec, inputs: Inputs,
                claims: PortClaims) -> tuple[dict[str, Any], RunPlan]:
    """The plan of inputs `resolve_inputs` has checked. Apart because a local launch checks
    them before it imports torch and forks its zygote, and builds the plan after
    (launcher/launch.py)."""
    from launcher.config.planner import build_plan  # numpy, the data: for a request that holds

    topo, config = inputs
    check_capacity(topo, config, str(req.topology), claims)
    return config, build_plan(topo, config, claims,
                              aggregator=protocol_spec(config["protocol"]).server_based)


def resolve_inputs(req: RunSpec) -> Inputs:
    """The topology and the resolved config, validated; a LaunchError naming what is wrong."""
    if not req.topology:
        raise LaunchError("--topology is required")
    if not req.protocol:
        raise LaunchError("--protocol is required")
    try:
        spec = protocol_spec(req.protocol)  # its entry point alone, unless it is not there
    except KeyError as exc:
        raise LaunchError(f"--protocol: {exc.args[0]}") from None
    objects = req.objects
    try:
        topo = objects.topology if objects and objects.topology else request_topology(
            req.topology, req.protocol)
    except TopologyError as exc:
        raise LaunchError(str(exc)) from None
    check_node_ids(topo, req.topology, spec.server_based)
    config = resolve_config(req.protocol, req.config_file, req.options.model_dump(), req.sets)
    if objects is not None:
        config = objects.apply(config, partition_given=req.options.partition is not None)
    check_failure_policy(config, req.protocol, spec.survives_failures)
    check_rounds(topo, config, spec.server_based)
    config["topology"] = topo.name
    return topo, config


def request_topology(source: str, protocol: str) -> Topology:
    """The topology file, its node attributes validated: those of the runtime and `protocol`
    first, and only a file those refuse against every protocol's (a topology may carry the
    attributes of several protocols, and its message is the one that model gives), so that a
    request's checks load one protocol, not all of them (issue 45)."""
    path = resolve_topology_path(source)
    try:
        return load_topology(path, node_attributes_model(protocol))
    except TopologyError:
        return load_topology(path, node_attributes_model())
