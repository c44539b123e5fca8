"""Launch-time checks of a resolved plan, so that what would fail a node after the mesh started
(exit 1, a node's log to read) is bad input instead: exit 2, one line, nothing started.

- `check_protocol`: the protocol's own `check_plan` (the model fits the data, a protocol's own
  dataset, its overrides against the plan's nodes) and its capabilities' (a robust aggregation
  rule against the graph's smallest in-degree);
- `check_listeners_free`: no other program holds a port this run is to listen on (a node's
  topology `port`, `endpoints.*`); only for a local zmq run, where the launcher binds them;
- `check_local`: a run the launcher starts itself does not discover its nodes' addresses.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from dfl_node.plan import RunPlan
from launcher.config.endpoints import wildcard_bind
from launcher.errors import LaunchError
from protocols.capabilities import RobustAggregation
from protocols.registry import PROTOCOLS, protocol_spec


def check_protocol(plan: RunPlan) -> None:
    try:
        protocol_spec(plan.protocol).check(plan)
    except ValueError as exc:
        raise LaunchError(f"{plan.protocol}: {exc}") from None


def listeners(plan: RunPlan) -> list[tuple[str, str]]:
    """(the setting that fixes it, bind address) of every socket a local run listens on."""
    out = [(f"node {n.id}" if n.id != plan.aggregator else "endpoints.aggregator", n.bind)
           for n in plan.nodes]
    out.append(("endpoints.collector", wildcard_bind(plan.collector)))
    if plan.prephase:
        out.append(("endpoints.coordinator", plan.prephase.bind))
    return out


def can_listen(host: str, port: int) -> bool:
    """Whether a listener can bind `host:port` the way ZeroMQ binds (SO_REUSEADDR), so that the
    connections of a run that just ended, still in TIME_WAIT, do not count as a holder."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def check_listeners_free(plan: RunPlan, topology_file: str) -> None:
    for what, bind in listeners(plan):
        host, _, port = bind.removeprefix("tcp://").rpartition(":")
        if not can_listen(host, int(port)):
            where = f"{topology_file}: {what}" if what.startswith("node") else what
            raise LaunchError(f"{where}: port {port} is in use on {host}")


def check_local(plan: RunPlan) -> None:
    """A run the launcher starts itself knows every address: discovery is for nodes that a
    scheduler or an operator starts elsewhere."""
    if plan.discovery:
        raise LaunchError("endpoints.nodes=discover: for nodes started elsewhere (dfl-launch "
                          "plan, then dfl-launch collect and one dfl-node per node); a local "
                          "run picks its nodes' ports itself")


def check_aggregation_declared(source: str, layer: Mapping[str, Any], protocol: str,
                               robust: bool) -> None:
    """`aggregation` only for a protocol that declares robust aggregation: another one is
    told which do, not that the key is unknown."""
    key = RobustAggregation.key
    if robust or not (key in layer or key in (layer.get("hyper") or {})):
        return
    able = sorted(name for name, spec in PROTOCOLS.items() if spec.robust_aggregation)
    raise LaunchError(f"{source}: hyper.{key}: {protocol} does not mix with a choice of rule "
                      f"(protocols with robust aggregation: {', '.join(able) or 'none'})")


def check_failure_policy(config: Mapping[str, Any], protocol: str, survives: bool) -> None:
    """Whether the protocol may `continue` after a death (the values themselves are checked by
    the wire section's model)."""
    if config["wire"]["on_failure"] == "continue" and not survives:
        surviving = sorted(name for name, spec in PROTOCOLS.items() if spec.survives_failures)
        raise LaunchError(f"--on-failure continue: {protocol} has no rules for losing a node; "
                          f"use stop (protocols that survive failures: {', '.join(surviving)})")
