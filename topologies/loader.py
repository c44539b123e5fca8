"""Reading and validating topology files.

A topology file is YAML with top-level keys `name` (optional), `nodes`, `edges` and `generator`
(optional). Every rule a run depends on is checked here, before any process starts, and the first
violation becomes a one-line `TopologyError` of the form `<file>: <field>: <reason>`, where the
field names the node (`nodes[2] (id 7): port`) or edge (`edges[4] (3, 3)`) at fault. Node keys
other than the known ones are free attributes; keys unknown at the top level or inside an edge
mapping are errors, because there they can only be typos.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import networkx as nx
import yaml

from topologies.errors import TopologyError
from topologies.model import EdgeSpec, NodeSpec, Topology

SHIPPED_DIR = Path(__file__).resolve().parent
TOP_LEVEL_KEYS = ("name", "nodes", "edges", "generator")
NODE_FIELDS = ("id", "host", "port", "device", "position")
# Edge attribute -> (check, wording). A zero weight is refused: an edge that exists for
# communication but not for mixing is a contradiction; leave the edge out instead.
EDGE_ATTRS = {
    "weight": (lambda x: x > 0, "a positive number"),
    "latency_ms": (lambda x: x >= 0, "a non-negative number"),
    "bandwidth_mbps": (lambda x: x > 0, "a positive number"),
    "loss": (lambda x: 0 <= x < 1, "a number in [0, 1)"),
}
EDGE_KEYS = ("u", "v", *EDGE_ATTRS)
DEVICE_RE = re.compile(r"cpu|cuda|cuda:\d+|auto")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys instead of keeping the last one silently."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            # Merge keys (`<<`) may legitimately be overridden; only literal keys must be unique.
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            key = self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def shipped_topologies() -> list[str]:
    """Names of the topology files shipped inside this package."""
    return sorted(p.stem for p in SHIPPED_DIR.glob("*.yaml"))


def resolve_topology_path(name_or_path: str | Path) -> Path:
    """A path that exists as given, else the shipped `topologies/<name>.yaml` of a bare name."""
    path = Path(name_or_path)
    if path.exists():
        return path
    if path.parent == Path("."):
        shipped = SHIPPED_DIR / (path.name if path.suffix in (".yaml", ".yml") else f"{path}.yaml")
        if shipped.is_file():
            return shipped
    names = ", ".join(shipped_topologies())
    raise TopologyError(f"{name_or_path}: no such file, and no shipped topology (shipped: {names})")


def load_topology(path: str | Path) -> Topology:
    """Read, parse and validate a topology file; any problem is a one-line `TopologyError`."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise TopologyError(f"{source}: cannot read: {exc.strerror or exc}") from None
    if b"\x00" in raw:
        raise TopologyError(f"{source}: not a text file (binary content: NUL bytes)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start]
        raise TopologyError(
            f"{source}: not UTF-8 text (byte 0x{bad:02x} at offset {exc.start})"
        ) from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader: builds no Python objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise TopologyError(f"{source}: malformed YAML: {where}{exc.problem}") from None
    except yaml.YAMLError as exc:
        raise TopologyError(f"{source}: malformed YAML: {' '.join(str(exc).split())}") from None
    if data is None:
        raise TopologyError(f"{source}: empty file (no YAML content)")
    return parse_topology(data, source)


def parse_topology(data: Any, source: str) -> Topology:
    """Validate a decoded topology mapping (from YAML, JSON or `Topology.to_dict`)."""
    return _Parser(source).topology(data)


def _show(value: Any) -> str:
    """A short one-line rendering of an offending value for messages."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class _Parser:
    """Walks one decoded file; `fail` prefixes every message with the file name."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, reason: str) -> TopologyError:
        return TopologyError(f"{self.source}: {where}: {reason}")

    def topology(self, data: Any) -> Topology:
        if not isinstance(data, dict):
            kind = type(data).__name__
            raise TopologyError(f"{self.source}: top level must be a mapping, got a {kind}")
        for key in data:
            if key not in TOP_LEVEL_KEYS:
                allowed = ", ".join(sorted(TOP_LEVEL_KEYS))
                raise self.fail(str(key), f"unknown top-level key (allowed: {allowed})")
        name = data.get("name", Path(self.source).stem)
        if not isinstance(name, str) or not name:
            raise self.fail("name", f"must be a non-empty string, got {_show(name)}")
        generator = data.get("generator")
        if generator is not None and not isinstance(generator, dict):
            raise self.fail("generator", f"must be a mapping, got {_show(generator)}")
        nodes = self.nodes(data.get("nodes"))
        edges = self.edges(data.get("edges"), {n.id for n in nodes})
        self.check_connected(nodes, edges)
        return Topology(nodes=nodes, edges=edges, generator=generator, name=name)

    def nodes(self, raw: Any) -> tuple[NodeSpec, ...]:
        if raw is None or raw == []:
            raise self.fail("nodes", "no nodes (a topology needs at least one)")
        if not isinstance(raw, list):
            raise self.fail("nodes", f"must be a list of node mappings, got {_show(raw)}")
        nodes: list[NodeSpec] = []
        first_index: dict[int, int] = {}
        addresses: dict[tuple[str, int], str] = {}
        dimension: tuple[int, str] | None = None
        for i, item in enumerate(raw):
            node = self.node(i, item)
            label = f"nodes[{i}] (id {node.id})"
            if node.id in first_index:
                raise self.fail(
                    f"{label}: id", f"duplicate node id (also nodes[{first_index[node.id]}])"
                )
            first_index[node.id] = i
            if node.address is not None:
                host, port = node.address
                if node.address in addresses:
                    raise self.fail(
                        f"{label}: port",
                        f"{host}:{port} is already used by {addresses[node.address]}",
                    )
                addresses[node.address] = label
            if node.position is not None:
                if dimension is None:
                    dimension = (len(node.position), label)
                elif len(node.position) != dimension[0]:
                    raise self.fail(
                        f"{label}: position",
                        f"has {len(node.position)} coordinates"
                        f" but {dimension[1]} has {dimension[0]}",
                    )
            nodes.append(node)
        return tuple(nodes)

    def node(self, i: int, item: Any) -> NodeSpec:
        if not isinstance(item, dict):
            raise self.fail(f"nodes[{i}]", f"must be a mapping with an id, got {_show(item)}")
        if "id" not in item:
            raise self.fail(f"nodes[{i}]: id", "missing")
        node_id = item["id"]
        if not _is_int(node_id) or node_id < 0:
            raise self.fail(
                f"nodes[{i}]: id", f"must be a non-negative integer, got {_show(node_id)}"
            )
        label = f"nodes[{i}] (id {node_id})"
        for key in item:
            if not isinstance(key, str):
                raise self.fail(f"{label}: {key!r}", "attribute names must be strings")
        host = item.get("host")
        if host is not None and (
            not isinstance(host, str) or not host or any(c.isspace() for c in host)
        ):
            raise self.fail(f"{label}: host", f"must be a host name or address, got {_show(host)}")
        port = item.get("port")
        if port is not None and not (_is_int(port) and 1 <= port <= 65535):
            raise self.fail(f"{label}: port", f"must be an integer in 1..65535, got {_show(port)}")
        device = item.get("device")
        if device is not None and not (isinstance(device, str) and DEVICE_RE.fullmatch(device)):
            raise self.fail(
                f"{label}: device", f"must be cpu, cuda, cuda:K or auto, got {_show(device)}"
            )
        position = item.get("position")
        if position is not None:
            if not (
                isinstance(position, list)
                and len(position) in (2, 3)
                and all(_is_number(x) for x in position)
            ):
                raise self.fail(
                    f"{label}: position",
                    f"must be a list of 2 or 3 finite numbers, got {_show(position)}",
                )
            position = tuple(float(x) for x in position)
        attrs = {k: v for k, v in item.items() if k not in NODE_FIELDS}
        return NodeSpec(node_id, host, port, device, position, attrs)

    def edges(self, raw: Any, ids: set[int]) -> tuple[EdgeSpec, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise self.fail("edges", f"must be a list of edges, got {_show(raw)}")
        seen: dict[tuple[int, int], str] = {}
        edges: list[EdgeSpec] = []
        for i, item in enumerate(raw):
            edge, label = self.edge(i, item, ids)
            if edge.pair in seen:
                raise self.fail(label, f"duplicate edge (same as {seen[edge.pair]})")
            seen[edge.pair] = label
            edges.append(edge)
        return tuple(edges)

    def edge(self, i: int, item: Any, ids: set[int]) -> tuple[EdgeSpec, str]:
        """The validated edge and its label as given (`edges[4] (3, 1)`) for later messages."""
        if isinstance(item, list) and len(item) == 2:
            ends, attrs = item, {}
        elif isinstance(item, dict):
            for key in ("u", "v"):
                if key not in item:
                    raise self.fail(f"edges[{i}]: {key}", "missing")
            ends = [item["u"], item["v"]]
            attrs = {k: v for k, v in item.items() if k not in ("u", "v")}
        else:
            raise self.fail(
                f"edges[{i}]",
                f"must be a pair [u, v] or a mapping {{u, v, ...}}, got {_show(item)}",
            )
        label = f"edges[{i}] ({_show(ends[0])}, {_show(ends[1])})"
        for key, end in zip(("u", "v"), ends, strict=True):
            if not _is_int(end):
                raise self.fail(
                    f"{label}: {key}", f"must be a node id (an integer), got {_show(end)}"
                )
            if end not in ids:
                raise self.fail(f"{label}: {key}", f"node {end} is not in nodes")
        if ends[0] == ends[1]:
            raise self.fail(label, "self-loop")
        for key, value in attrs.items():
            if key not in EDGE_ATTRS:
                allowed = ", ".join(EDGE_KEYS)
                raise self.fail(f"{label}: {key}", f"unknown edge key (allowed: {allowed})")
            check, wording = EDGE_ATTRS[key]
            if not (_is_number(value) and check(value)):
                raise self.fail(f"{label}: {key}", f"must be {wording}, got {_show(value)}")
        return EdgeSpec(ends[0], ends[1], {k: float(v) for k, v in attrs.items()}), label

    def check_connected(self, nodes: tuple[NodeSpec, ...], edges: tuple[EdgeSpec, ...]) -> None:
        g: nx.Graph[int] = nx.Graph()
        g.add_nodes_from(n.id for n in nodes)
        g.add_edges_from(e.pair for e in edges)
        sizes = sorted((len(c) for c in nx.connected_components(g)), reverse=True)
        if len(sizes) > 1:
            listed = ", ".join(map(str, sizes))
            raise self.fail(
                "edges", f"graph is disconnected: {len(sizes)} components of sizes {listed}"
            )
