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
from launcher.config.planner import build_plan
from launcher.config.ports import PortClaims
from launcher.config.run_config import node_attributes_model
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from protocols.registry import PROTOCOLS, unknown_protocol
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
    topo, config = inputs
    check_capacity(topo, config, str(req.topology), claims)
    return config, build_plan(topo, config, claims,
                              aggregator=PROTOCOLS[config["protocol"]].server_based)


def resolve_inputs(req: RunSpec) -> Inputs:
    """The topology and the resolved config, validated; a LaunchError naming what is wrong."""
    if not req.topology:
        raise LaunchError("--topology is required")
    if not req.protocol:
        raise LaunchError("--protocol is required")
    if req.protocol not in PROTOCOLS:
        raise LaunchError(f"--protocol: {unknown_protocol(req.protocol)}")
    objects = req.objects
    try:
        topo = objects.topology if objects and objects.topology else load_topology(
            resolve_topology_path(req.topology), node_attributes_model())
    except TopologyError as exc:
        raise LaunchError(str(exc)) from None
    check_node_ids(topo, req.topology, PROTOCOLS[req.protocol].server_based)
    config = resolve_config(req.protocol, req.config_file, req.options.model_dump(), req.sets)
    if objects is not None:
        config = objects.apply(config, partition_given=req.options.partition is not None)
    check_failure_policy(config, req.protocol, PROTOCOLS[req.protocol].survives_failures)
    check_rounds(topo, config, PROTOCOLS[req.protocol].server_based)
    config["topology"] = topo.name
    return topo, config
