"""Topology + resolved config -> RunPlan."""

from __future__ import annotations

from typing import Any

import numpy as np

from dfl_node.netsim import tdma
from dfl_node.netsim.virtual_clock import LinkModel
from dfl_node.plan import NodeEntry, RunPlan
from dfl_node.runner.results_seal import new_results_key
from dfl_node.settings.discovery import DiscoverySection
from dfl_node.settings.link import LinkSettings
from dfl_node.settings.prephase import PrephaseSection
from dfl_node.settings.schedule import ScheduleSection
from dfl_node.settings.wire import WireSettings
from launcher.config.adversaries import check_data, resolve_adversaries, without_adversaries
from launcher.config.backend_catalog import local_spec
from launcher.config.checks import check_protocol
from launcher.config.devices import resolve_devices
from launcher.config.endpoints import (
    DISCOVER_BIND,
    LOCAL_HOST,
    bind_host,
    endpoint,
    fixed_endpoint,
)
from launcher.config.ports import PortClaims
from launcher.config.run_settings import dataset_sections
from launcher.data.prepare import plan_section, prepare_data
from launcher.errors import LaunchError
from launcher.results.cycle_metrics import cycle_section
from protocols.registry import PROTOCOLS, protocol_spec
from topologies.errors import TopologyError
from topologies.mixing import mixing_matrix
from topologies.model import Topology


def node_entries(topology: Topology, claims: PortClaims,
                 discover: bool = False) -> tuple[NodeEntry, ...]:
    """Addresses for every node: the topology's host/port where given, claimed local ports else;
    with `discover`, none (each node binds a port the OS picks and reports it at start-up)."""
    if discover:
        return discovered_entries(topology)
    missing = [n for n in topology.nodes if n.port is None]
    spare = iter(claims.claim(len(missing)))
    devices = resolve_devices([(n.id, n.device) for n in topology.nodes])
    out = []
    for node, device in zip(topology.nodes, devices, strict=True):
        host = node.host or LOCAL_HOST
        port = node.port if node.port is not None else next(spare)
        out.append(NodeEntry(id=node.id, bind=f"tcp://{bind_host(host)}:{port}",
                             address=f"tcp://{host}:{port}", host=host,
                             device=device, attrs=dict(node.attrs)))
    return tuple(sorted(out, key=lambda e: e.id))


def discovered_entries(topology: Topology) -> tuple[NodeEntry, ...]:
    """Nodes whose address and host the directory fills in at start-up (dfl_node/runner/
    discovery.py); a topology that fixes a node's host or port contradicts that."""
    fixed = [n.id for n in topology.nodes if n.port is not None or n.host is not None]
    if fixed:
        raise LaunchError(f"topology {topology.name}: nodes {fixed} have a host or port, but "
                          "endpoints.nodes=discover lets each node pick its own")
    devices = resolve_devices([(n.id, n.device) for n in topology.nodes])
    return tuple(sorted((NodeEntry(id=n.id, bind=DISCOVER_BIND, address="", host="",
                                   device=device, attrs=dict(n.attrs))
                         for n, device in zip(topology.nodes, devices, strict=True)),
                        key=lambda e: e.id))


def discovery_section(config: dict[str, Any], claims: PortClaims) -> DiscoverySection | None:
    """Where the nodes of a discover plan meet: `endpoints.directory`, else a port beside the
    collector (the process that collects serves the directory too; None for fixed addresses)."""
    if config["endpoints"].get("nodes") != "discover":
        return None
    if config.get("secure"):
        raise LaunchError("endpoints.nodes=discover: --secure is not supported yet (the "
                          "directory would need a key of its own)")
    if fixed_endpoint(config, "directory") is not None:
        bind, address = endpoint(config, "directory", claims)
    else:
        collector = fixed_endpoint(config, "collector")
        host = collector[0] if collector is not None else LOCAL_HOST
        port = claims.claim(1)[0]
        bind, address = f"tcp://{bind_host(host)}:{port}", f"tcp://{host}:{port}"
    return DiscoverySection(bind=bind, address=address)


def aggregator_entry(topology: Topology, config: dict[str, Any],
                     claims: PortClaims) -> NodeEntry:
    """The hub of a server-based protocol: the next free id, `endpoints.aggregator` (a local
    port by default), the CPU."""
    bind, address = endpoint(config, "aggregator", claims)
    host = address.removeprefix("tcp://").rpartition(":")[0]
    return NodeEntry(id=max(topology.ids) + 1, bind=bind, address=address, host=host,
                     device="cpu", attrs={"role": "aggregator"})


def mixing_weights(topology: Topology, name: str) -> tuple[tuple[int, int, float], ...]:
    """The mixing matrix's nonzero entries; none for a directed or time-varying topology, whose
    weights are per round (`RunPlan.weight_row(node, r)`)."""
    if topology.dynamic:
        return ()
    try:
        matrix = mixing_matrix(topology, name)
    except TopologyError as exc:
        raise LaunchError(str(exc)) from None
    ids = topology.ids
    rows, cols = np.nonzero(matrix)
    return tuple((ids[a], ids[b], float(matrix[a, b])) for a, b in zip(rows, cols, strict=True))


def data_section(config: dict[str, Any]) -> dict[str, Any]:
    return {"dataset": config["dataset"], "data_root": config["data_root"],
            "partition": config["partition"], "eval_split": config["eval_split"],
            "seed": config["seed"],
            **{section: config.get(section, {}) for section in dataset_sections()}}


def build_plan(topology: Topology, config: dict[str, Any], claims: PortClaims,
               aggregator: bool = False) -> RunPlan:
    """`aggregator`: the protocol is server-based, so the plan gets a hub node beside the
    topology's clients (its data, fairness and bits never count as a client's)."""
    local_spec(config["transport"])
    check_dynamic_graph(topology, config)
    schedule = schedule_section(topology, config)
    if aggregator and schedule.mode != "sync":
        raise LaunchError(f"schedule: {config['protocol']} talks through an aggregator (a star "
                          "the topology does not have), so it runs only with schedule=sync")
    discovery = discovery_section(config, claims)
    hub_id = max(topology.ids) + 1 if aggregator else None  # aggregator_entry's id
    adversaries = resolve_adversaries(topology, config, hub_id)
    topology = without_adversaries(topology)
    nodes = node_entries(topology, claims, discover=discovery is not None)
    hub = aggregator_entry(topology, config, claims) if aggregator else None
    plan = RunPlan(
        protocol=config["protocol"], topology_name=topology.name, topology=topology.to_dict(),
        nodes=(*nodes, hub) if hub else nodes, mixing=config["mixing"],
        weights=mixing_weights(topology, config["mixing"]), rounds=config["rounds"],
        seed=config["seed"], eval_every=config["eval_every"],
        data=plan_section({**data_section(config), **prepare_data(config, len(topology.nodes))}),
        model=config["model"], hyper=config["hyper"],
        link=LinkSettings.model_validate(config["link"]),
        wire=WireSettings.model_validate(config["wire"]),
        transport=config["transport"], prephase=prephase_section(config, claims),
        collector=endpoint(config, "collector", claims)[1], schedule=schedule,
        aggregator=hub.id if hub else None, cycle_metrics=cycle_section(config["cycle_metrics"]),
        checkpoint_every=config["checkpoint_every"], discovery=discovery,
        eval_at_start=config["eval_at_start"], results_key=new_results_key(),
        adversaries=adversaries)
    check_data(adversaries, plan.data.num_classes, plan.data.shape)
    check_protocol(plan)
    return plan


def check_dynamic_graph(topology: Topology, config: dict[str, Any]) -> None:
    """What a directed or time-varying topology cannot be run with (exit 2, one line): a
    protocol that reads one undirected graph, a mixing scheme of one graph (its weights are
    per round, topologies/schedules.py), TDMA slots (coloured for one undirected graph), and
    the failure agreement (which floods one fixed graph)."""
    if not topology.dynamic:
        return
    what = f"topology {topology.name} is {'time-varying' if topology.schedule else 'directed'}"
    protocol = config["protocol"]
    if not protocol_spec(protocol).dynamic_graphs:
        able = sorted(name for name, spec in PROTOCOLS.items() if spec.dynamic_graphs)
        raise LaunchError(f"{what}: {protocol} runs on one undirected graph (protocols for "
                          f"directed and time-varying graphs: {', '.join(able)})")
    if config["mixing"] != "metropolis":
        raise LaunchError(f"mixing: {what}, so its weights are per round (Metropolis on "
                          f"undirected rounds, 1/(1 + in-degree) on directed ones); "
                          f"mixing={config['mixing']} is for one undirected graph")
    if config["schedule"] != "sync":
        raise LaunchError(f"schedule: {what}; TDMA slots are coloured for one undirected "
                          "graph, so it runs only with schedule=sync")
    if config["wire"]["on_failure"] == "continue":
        raise LaunchError(f"--on-failure continue: {what}; the failure agreement floods one "
                          "fixed graph, so use stop")


def schedule_section(topology: Topology, config: dict[str, Any]) -> ScheduleSection:
    """The TDMA slots (or sync), after checking the link options the same way a node will."""
    topo = topology.to_dict()
    try:
        LinkModel.from_plan(topo, config["link"])
    except ValueError as exc:
        raise LaunchError(f"link: {exc}") from None
    try:
        return tdma.plan_section(topo, config["schedule"], config["tdma"])
    except ValueError as exc:
        raise LaunchError(f"schedule: {exc}") from None


MAX_PREPHASE_BYTES = 64 << 20  # a report holds a small raw sample; nothing near this


def prephase_section(config: dict[str, Any], claims: PortClaims) -> PrephaseSection | None:
    """The plan's `prephase` section when the protocol needs one: the coordinator's address is
    `endpoints.coordinator`, or a local port beside the launcher."""
    if not protocol_spec(config["protocol"]).needs_prephase:
        return None
    bind, address = endpoint(config, "coordinator", claims)
    wire = WireSettings.model_validate(config["wire"])
    return PrephaseSection(bind=bind, address=address,
                           # a coordinator on another host may start as late as the last node
                           timeout_s=max(wire.recv_timeout_s, wire.rendezvous_seconds),
                           max_bytes=MAX_PREPHASE_BYTES)
