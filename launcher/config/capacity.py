"""What the wire and this machine can hold, checked on the topology before a plan is built.

Why before: building the plan of a 100,000-node ring (mixing weights, schedule, data split, one
port claimed per node) took minutes and then failed on the ports; a node id the wire cannot
carry started every node and failed in each. These checks cost a pass over the node list and
one read of /proc/meminfo, and each refusal is one line, exit 2, nothing started.

- Node ids: a node's ZeroMQ routing id is its id as 4 bytes (dfl_node/transports/zeromq.py), so
  an id, the hub's included (the topology's largest id plus one), is at most MAX_NODE_ID.
- Ports: every node without a topology `port` and every service without an `endpoints` entry
  takes one claimed local port, from a range of PortClaims.capacity() ports.
- Memory: every node process on this host holds at least NODE_PROCESS_BYTES; refused when
  the machine's available memory cannot hold that many (the threads of `--transport inproc`
  share one interpreter and are not counted).
- Rounds: a node's `done` record carries its ledger, one entry per link and round, and its
  round times, and the collector takes records of up to MAX_RECORD_BYTES: a run of more rounds
  than its widest node's record holds would lose that node's result at the end. The ceiling
  follows from the widest node's links (a server's hub: one per client): 116,000 rounds on a
  ring, 28,000 on a complete graph of 10. The wire itself carries rounds up to 2^64.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from dfl_config.limits import size_text
from dfl_node.runner.results_seal import MAX_RECORD_BYTES
from dfl_node.transports.routing_ids import MAX_NODE_ID
from launcher.config.backend_catalog import local_spec
from launcher.config.endpoints import LOOPBACK, fixed_endpoint
from launcher.config.ports import PortClaims
from launcher.errors import LaunchError
from protocols.registry import protocol_spec
from topologies.model import Topology

LINK_ROUND_BYTES = 256
"""A node's done record per link and round: ledger cells and formula bits (194 bytes measured
on a complete graph of 10, the model sent whole each round; more formula components take more)."""
ROUND_BYTES = 64
"""... and per round: its wall and CPU times."""
NODE_PROCESS_BYTES = 16 << 20
"""The least a node process holds: below the 19.5 MB PSS per node of a 500-node MLP ring, the
smallest measured (docs/benchmarks.md), so that only a mesh that cannot fit is refused."""
MEMINFO = Path("/proc/meminfo")


def check_node_ids(topology: Topology, source: str, server_based: bool) -> None:
    """Every node id of the run within what the wire carries (the hub's: the largest + 1)."""
    largest = max(topology.ids)
    if largest > MAX_NODE_ID:
        raise LaunchError(f"{source}: node id {largest} is beyond the wire's node ids "
                          f"(0..{MAX_NODE_ID}: a 4-byte routing id)")
    if server_based and largest + 1 > MAX_NODE_ID:
        raise LaunchError(f"{source}: node id {largest} leaves no id for the aggregator "
                          f"(the largest id plus one), beyond the wire's 0..{MAX_NODE_ID}")


def rounds_ceiling(topology: Topology, server_based: bool) -> int:
    """The most rounds whose per-round records fit a node's `done` record (see the module)."""
    degree = Counter(node for edge in topology.edges for node in (edge.u, edge.v))
    widest = len(topology.nodes) if server_based else max(degree.values(), default=0)
    return MAX_RECORD_BYTES // (LINK_ROUND_BYTES * widest + ROUND_BYTES)


def check_rounds(topology: Topology, config: dict[str, Any], server_based: bool) -> None:
    ceiling = rounds_ceiling(topology, server_based)
    if config["rounds"] > ceiling:
        raise LaunchError(f"rounds: at most {ceiling} on {topology.name} (a node's done record "
                          f"holds about {LINK_ROUND_BYTES} bytes per link and round, and the "
                          f"collector takes records of up to {size_text(MAX_RECORD_BYTES)}), "
                          f"got {config['rounds']}")


def ports_needed(topology: Topology, config: dict[str, Any]) -> int:
    """Local ports the plan will claim: nodes without a port, services without an endpoint."""
    spec = protocol_spec(config["protocol"])
    services = ["collector", *(["coordinator"] if spec.needs_prephase else []),
                *(["aggregator"] if spec.server_based else [])]
    if config["endpoints"].get("nodes") == "discover":
        return sum(fixed_endpoint(config, s) is None for s in (*services, "directory"))
    loose = sum(node.port is None for node in topology.nodes)
    return loose + sum(fixed_endpoint(config, service) is None for service in services)


def available_memory() -> int | None:
    """MemAvailable of this machine in bytes (None where /proc/meminfo does not say)."""
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_capacity(topology: Topology, config: dict[str, Any], source: str,
                   claims: PortClaims) -> None:
    """Enough local ports for the plan, and memory for the node processes of this host."""
    needed, capacity = ports_needed(topology, config), claims.capacity()
    if needed > capacity:
        raise LaunchError(f"{source}: {len(topology.nodes)} nodes need {needed} local ports, "
                          f"more than this machine's port range holds ({capacity}); give "
                          "nodes a host and port in the topology (one dfl-node per host)")
    if local_spec(config["transport"]).in_process:
        return
    here = sum(node.host is None or node.host in LOOPBACK for node in topology.nodes)
    available = available_memory()
    least = here * NODE_PROCESS_BYTES
    if available is not None and least > available:
        raise LaunchError(f"{source}: {here} node processes need at least {size_text(least)} "
                          f"({size_text(NODE_PROCESS_BYTES)} each), more than this machine's "
                          f"available memory ({size_text(available)})")
