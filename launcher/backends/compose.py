"""`dfl-launch compose ... -o DIR`: a mesh of containers, one node per container.

Containers are hosts of their own (one network stack each), so this is the one-node-per-host
setup of launcher/config/host_plan.py with the addresses chosen here: every node is the service
`node-<id>` on port NODE_PORT, every other service of the run (collector, pre-phase coordinator,
a server's aggregator) is the service of that name on its port in SERVICE_PORTS, and all of them
share one bridge network with a subnet of its own. Service names resolve through the engine's
DNS on that network, so the plan holds names, not addresses.

DIR gets everything the containers mount, so it can move to another docker host whole:

    DIR/docker-compose.yml
    DIR/run/plan.json        the plan; every container's run directory is DIR/run
    DIR/data/<entry>/        the prepared dataset (real datasets only), mounted read-only

The dataset is prepared on this host, once, exactly as a local launch prepares it (decoded
arrays in a directory named by the content hash); the containers find it under their cache
root (DFL_MESH_CACHE) and check the fingerprint before memory-mapping their shards, so a
container never decodes and never runs on other data than the plan's.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from dfl_node.learning.datacache import DataError, locate_entry, read_meta
from dfl_node.plan import RunPlan
from launcher.backends.base import HandOffBackend
from launcher.config.backend_catalog import COMPOSE
from launcher.config.compose_options import DEFAULT_IMAGE, DEFAULT_SUBNET, ComposeOptions
from launcher.config.host_plan import place_plan, resolve_host_plan, services
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from topologies.model import Topology

NODE_PORT = 7000
SERVICE_PORTS = {"collector": 7100, "coordinator": 7101, "aggregator": 7102}
COMPOSE_FILE = "docker-compose.yml"
NETWORK = "mesh"
# Where the containers see DIR/run and DIR/data.
RUN_MOUNT, DATA_MOUNT = "/mesh/run", "/mesh/data"
def node_service(node_id: int) -> str:
    return f"node-{node_id}"


def place_in_containers(topology: Topology, config: dict[str, Any]
                        ) -> tuple[Topology, dict[str, Any]]:
    """Every node at its service's name and NODE_PORT, every service at its own name and port
    (whatever addresses the topology and options gave: containers have their own)."""
    nodes = tuple(replace(n, host=node_service(n.id), port=NODE_PORT) for n in topology.nodes)
    endpoints = {name: f"{name}:{port}" for name, port in SERVICE_PORTS.items()}
    return replace(topology, nodes=nodes), {**config, "endpoints": endpoints}


def check_subnet(text: str) -> str:
    """The subnet in canonical form; a LaunchError naming `--subnet` otherwise."""
    try:
        net = ipaddress.IPv4Network(text)
    except ValueError as exc:
        raise LaunchError(f"--subnet: {exc}") from None
    if net.num_addresses < 8:
        raise LaunchError(f"--subnet: {net} is too small for a mesh (at most /29)")
    return str(net)


def service(name: str, image: str, command: list[str]) -> dict[str, Any]:
    """One container of the mesh: the image, its name as host name (what reports show), the
    mounts, this user's ids (so the run directory stays the caller's), the mesh network."""
    return {
        "image": image,
        "hostname": name,
        "command": command,
        "user": f"{os.getuid()}:{os.getgid()}",
        "environment": {"DFL_MESH_CACHE": DATA_MOUNT},
        "volumes": [f"./run:{RUN_MOUNT}", f"./data:{DATA_MOUNT}:ro"],
        "networks": [NETWORK],
    }


def gpu_reservation(device: str) -> dict[str, Any]:
    """Reserve the plan's GPU for the container. It sees that GPU as its only one, cuda:0,
    which DFL_MESH_DEVICE tells the node (the plan, and so every report, keep `cuda:K`)."""
    ordinal = device.partition(":")[2] or "0"
    gpu = {"driver": "nvidia", "device_ids": [ordinal], "capabilities": ["gpu"]}
    return {"deploy": {"resources": {"reservations": {"devices": [gpu]}}}}


def node_command(node_id: int) -> list[str]:
    return ["dfl-node", "--plan", f"{RUN_MOUNT}/plan.json", "--node-id", str(node_id),
            "--out", RUN_MOUNT]


SERVICE_COMMANDS = {
    "collector": ["dfl-launch", "collect", "--plan", f"{RUN_MOUNT}/plan.json", "--out",
                  RUN_MOUNT],
    "coordinator": ["dfl-node", "--coordinator", "--plan", f"{RUN_MOUNT}/plan.json", "--out",
                    RUN_MOUNT],
}


def compose_file(plan: RunPlan, image: str, subnet: str) -> dict[str, Any]:
    """The compose document: a service per node (the aggregator's named `aggregator`), one per
    other service of the protocol, and the network."""
    out: dict[str, Any] = {}
    for entry in plan.nodes:
        name = "aggregator" if entry.id == plan.aggregator else node_service(entry.id)
        out[name] = service(name, image, node_command(entry.id))
        if entry.device.startswith("cuda"):
            out[name]["environment"]["DFL_MESH_DEVICE"] = "cuda:0"
            out[name].update(gpu_reservation(entry.device))
    for name in services(plan.protocol):
        if name in SERVICE_COMMANDS:
            out[name] = service(name, image, SERVICE_COMMANDS[name])
    return {"services": out,
            "networks": {NETWORK: {"driver": "bridge", "ipam": {"config": [{"subnet": subnet}]}}}}


def link_or_copy(src: str, dst: str) -> None:
    """A hard link where source and destination share a file system (the arrays are only ever
    read), a copy elsewhere."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def export_data(plan: RunPlan, data_dir: Path) -> None:
    """The plan's prepared dataset under `data_dir`, where the containers' cache root is."""
    data_dir.mkdir(parents=True, exist_ok=True)
    prepared = plan.data.prepared_entry()
    if prepared is None:  # generated by each node: nothing to export
        return
    try:
        entry, meta = locate_entry(*prepared)
    except DataError as exc:
        raise LaunchError(str(exc)) from None
    target = data_dir / entry.name
    held = read_meta(target)
    if held is not None and held.fingerprint == meta.fingerprint:
        return
    shutil.rmtree(target, ignore_errors=True)
    tmp = data_dir / f".{entry.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(entry, tmp, copy_function=link_or_copy)
    tmp.replace(target)


class ComposeBackend(HandOffBackend):
    """A compose file the container engine starts: `docker-compose -f DIR/docker-compose.yml
    up` runs every node, the coordinator if any, and `dfl-launch collect` as the collector."""

    spec = COMPOSE

    def __init__(self, image: str = DEFAULT_IMAGE, subnet: str = DEFAULT_SUBNET) -> None:
        self.image = image
        self.subnet = check_subnet(subnet)

    def resolve(self, req: RunSpec) -> RunPlan:
        plan = resolve_host_plan(req, place_in_containers)
        if plan.secure is not None and not self.spec.secure:
            raise LaunchError("--secure: compose meshes do not carry key files yet")
        return plan

    def hand_off(self, plan: RunPlan, out: Path) -> Path:
        place_plan(plan, out / "run")
        export_data(plan, out / "data")
        path = out / COMPOSE_FILE
        path.write_text(yaml.safe_dump(compose_file(plan, self.image, self.subnet),
                                       sort_keys=False))
        return path


def write_compose(req: RunSpec, opts: ComposeOptions) -> Path:
    """Plan, data and compose file in `opts.out`; the compose file's path."""
    backend = ComposeBackend(opts.image, opts.subnet)
    return backend.hand_off(backend.resolve(req), opts.out)
