"""The node side of address discovery: report where this node listens, learn where the others do.

A plan made before a scheduler places its nodes (`endpoints.nodes: discover`, a Slurm job) cannot
name their hosts, so each node binds a port the OS picks on its own host and reports the
address its peers can reach to the run's directory (the launcher's, beside its collector). The
directory answers every node with the whole table once all have reported; from then on the run
is the same as one whose plan held those addresses from the start.

The address a node reports is that of the interface its host routes to the directory through:
the directory's host is the one every node is known to reach, so that interface is the one the
nodes' network shares. Messages are msgpack maps over a DEALER whose routing id is the node id
(as on the mesh), and the answer is checked before use: it comes from a port on the network.
"""

from __future__ import annotations

import socket
from typing import Any

import msgpack
import zmq

from dfl_config.errors import DflMeshError
from dfl_node.comm.rendezvous import RendezvousTimeout
from dfl_node.comm.routes import route_source
from dfl_node.plan import PlanError, RunPlan
from dfl_node.transports.zeromq import routing_id

MAX_TABLE_BYTES = 16 << 20  # a host name and an address per node: far below this
# A table entry: the address peers connect to, and the host's name (the summary's `host`).
Entry = tuple[str, str]


class DiscoveryError(RuntimeError, DflMeshError):
    """The directory refused this node, or its answer is not a table of the plan's nodes."""


def split_address(address: str) -> tuple[str, int]:
    """(host, port) of a `tcp://host:port` address."""
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    return host.strip("[]"), int(port)


def reachable_address(bound: str, directory: str) -> str:
    """The `tcp://ip:port` peers reach this node at, for the socket bound at `bound`: the
    address of the interface that routes to the directory, on the bound port."""
    _, port = split_address(bound)
    try:
        ip = route_source(*split_address(directory))
    except OSError as exc:  # an unknown host name, no route: the plan's address is wrong here
        raise DiscoveryError(f"the directory's address {directory} is not reachable from "
                             f"{socket.gethostname()}: {exc.strerror or exc}") from None
    return f"tcp://[{ip}]:{port}" if ":" in ip else f"tcp://{ip}:{port}"


def parse_table(raw: bytes, plan: RunPlan) -> dict[int, Entry]:
    """The directory's answer as node id -> (address, host); a DiscoveryError for a refusal or
    for anything but exactly the plan's nodes with text addresses."""
    try:
        answer = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise DiscoveryError(f"malformed directory answer: {type(exc).__name__}") from None
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        raise DiscoveryError(f"the directory refused: {answer['error']}")
    rows = answer.get("nodes") if isinstance(answer, dict) else None
    if not isinstance(rows, list):
        raise DiscoveryError("malformed directory answer: no node table")
    table: dict[int, Entry] = {}
    for row in rows:
        if not (isinstance(row, list) and len(row) == 3 and type(row[0]) is int
                and all(isinstance(x, str) and x for x in row[1:])):
            raise DiscoveryError(f"malformed directory answer: row {row!r}")
        table[row[0]] = (row[1], row[2])
    if sorted(table) != sorted(plan.ids):
        raise DiscoveryError(f"the directory's table has nodes {sorted(table)}, the plan "
                             f"{plan.ids}")
    return table


def report(node_id: int, address: str) -> dict[str, Any]:
    return {"node": node_id, "address": address, "host": socket.gethostname()}


def discover(plan: RunPlan, node_id: int, bound: str, timeout_s: float,
             context: zmq.Context | None = None) -> RunPlan:
    """The plan with every node's address, once the directory has them all: this node, bound
    at `bound`, reports itself and waits up to `timeout_s` (the rendezvous deadline: nodes of
    one job may start minutes apart). `context`: the node's one ZeroMQ context, else its own."""
    if plan.discovery is None:
        raise DiscoveryError(f"node {node_id}: the plan has no discovery section (its nodes "
                             "have addresses)")
    directory = plan.discovery.address
    own = context is None
    context = zmq.Context() if context is None else context
    sock = context.socket(zmq.DEALER)
    try:
        sock.setsockopt(zmq.ROUTING_ID, routing_id(node_id))
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_TABLE_BYTES)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(directory)
        sock.send(msgpack.packb(report(node_id, reachable_address(bound, directory))))
        if not sock.poll(max(int(timeout_s * 1000), 0), zmq.POLLIN):
            raise RendezvousTimeout(
                f"node {node_id}: the directory at {directory} sent no address table within "
                f"{timeout_s:g} s (wire.rendezvous_s): not every node reported")
        table = parse_table(sock.recv(), plan)
    except (DiscoveryError, PlanError) as exc:
        raise DiscoveryError(f"node {node_id}: {exc}") from None
    finally:
        sock.close()
        if own:
            context.term()
    return plan.with_addresses(table)
