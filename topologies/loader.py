"""Reading and validating topology files.

A topology file is YAML whose keys and values `topologies.schema` declares; the rules that span
several nodes or edges (unique ids and addresses, one position dimension, known edge ends, no
self-loops or duplicate edges, a connected graph) are checked here. Every rule a run depends on
is checked before any process starts, and the first violation becomes a one-line
`TopologyError`, `<file>: <path>: <reason>`: a dotted path for a single key
(`edges[4].latncy_ms: unknown key (did you mean latency_ms?)`), the node or edge as written for
a rule between several (`edges[4] (3, 3): self-loop`).

Node keys beyond the known fields are free attributes unless the caller declares the attributes
it reads (`node_attributes`); then any other node key is refused like a misspelt edge key.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dfl_config.limits import oversized_file
from dfl_config.problems import dotted, one_line, walk
from dfl_config.section import Section
from topologies.errors import TopologyError
from topologies.model import Topology, TopologyEdge, TopologyNode
from topologies.schedules import GraphSchedule, RoundGraphs, strongly_connected
from topologies.schema import (
    LINK_ATTRIBUTES,
    EdgeFields,
    NodeFields,
    ScheduleFields,
    TopologyFile,
    file_model,
    show,
)

SHIPPED_DIR = Path(__file__).resolve().parent


class _StrictLoader(yaml.CSafeLoader):
    """libyaml's SafeLoader (its C parser read a 100,000-node ring in a quarter of the CPU time
    of the pure-Python one, which took minutes on a loaded machine) that refuses duplicate
    mapping keys instead of keeping the last one silently."""

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


def load_topology(path: str | Path, node_attributes: type[Section] | None = None) -> Topology:
    """Read, parse and validate a topology file; any problem is a one-line `TopologyError`.

    `node_attributes` declares the node attributes the caller reads (see `parse_topology`)."""
    source = str(path)
    too_large = oversized_file(path, "a topology file")
    if too_large:
        raise TopologyError(too_large)
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
        data = yaml.load(text, Loader=_StrictLoader)  # a safe loader: builds no Python objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise TopologyError(f"{source}: malformed YAML: {where}{exc.problem}") from None
    except yaml.YAMLError as exc:
        raise TopologyError(f"{source}: malformed YAML: {' '.join(str(exc).split())}") from None
    if data is None:
        raise TopologyError(f"{source}: empty file (no YAML content)")
    return parse_topology(data, source, node_attributes)


def parse_topology(
    data: Any, source: str, node_attributes: type[Section] | None = None
) -> Topology:
    """Validate a decoded topology mapping (from YAML, JSON or `Topology.to_dict`).

    Without `node_attributes`, node keys beyond `NodeFields` are kept as free attributes. With
    it, they must be fields of that model (whose own checks apply), anything else is an unknown
    key, and `TopologyNode.attrs` holds the attributes the file sets, as validated (JSON data)."""
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise TopologyError(f"{source}: top level must be a mapping, got a {kind}")
    model = file_model(node_attributes)
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        raise TopologyError(f"{source}: {_one_line(exc, model)}") from None
    return _Checker(source).topology(parsed, Path(source).stem)


def _one_line(error: ValidationError, model: type[TopologyFile]) -> str:
    """`one_line`, and a key that is not a string (YAML reads `1:` or `on:` as one) shown as
    written, where pydantic would print it as a path."""
    first = error.errors(include_url=False)[0]
    if first["type"] == "invalid_key":
        path, _ = walk(model.model_json_schema(), first["loc"][:-1])
        return f"{dotted(path) or '(top level)'}: key {show(first['input'])} is not a string"
    return one_line(error, model)


class _Checker:
    """The rules between several nodes or edges, over a validated file; `fail` prefixes every
    message with the file name and names the node (`nodes[2] (id 7)`) or edge (`edges[4] (3, 1)`)
    as written, so that the message also points at what it clashes with."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, reason: str) -> TopologyError:
        return TopologyError(f"{self.source}: {where}: {reason}")

    def topology(self, parsed: TopologyFile, default_name: str) -> Topology:
        nodes = self.nodes(parsed.nodes)
        ids = {n.id for n in nodes}
        directed = bool(parsed.directed)
        edges = self.edges(parsed.edges or [], ids, directed)
        schedule = self.schedule(parsed.schedule, ids, directed) if parsed.schedule else None
        if schedule is not None:
            edges = self.union_edges(edges, schedule, sorted(ids), directed,
                                     given=parsed.edges is not None)
        self.check_connected(nodes, edges)
        if directed and not strongly_connected(sorted(ids), [e.pair for e in edges]):
            raise self.fail("edges", "directed graph is not strongly connected (some node "
                                     "cannot reach another along the arcs)")
        name = default_name if parsed.name is None else parsed.name
        return Topology(nodes=nodes, edges=edges, generator=parsed.generator, name=name,
                        directed=directed, schedule=schedule)

    def schedule(self, parsed: ScheduleFields, ids: set[int], directed: bool) -> GraphSchedule:
        if len(ids) < 2:
            raise self.fail("schedule", "a graph schedule needs at least 2 nodes")
        graphs = []
        for k, graph in enumerate(parsed.graphs or []):
            fields = [EdgeFields(u=u, v=v) for u, v in graph]
            edges = self.edges(fields, ids, directed, where=f"schedule.graphs[{k}]")
            graphs.append(tuple(e.pair for e in edges))
        return GraphSchedule(parsed.kind, tuple(graphs), parsed.peers or 0)

    def union_edges(self, edges: tuple[TopologyEdge, ...], schedule: GraphSchedule,
                    ids: list[int], directed: bool, given: bool) -> tuple[TopologyEdge, ...]:
        """A schedule's `edges`: the union of its arcs, derived where the file leaves them out;
        random-peers draws from them, so it needs them."""
        if schedule.kind == "random-peers":
            if not given:
                raise self.fail("edges", "random-peers draws each round's peers from edges; "
                                         "give them (every pair for the complete graph)")
            base = RoundGraphs.of(ids, (e.pair for e in edges), directed).base
            short = [i for i in ids if len(RoundGraphs.out_of(base, i)) < schedule.peers]
            if short:
                raise self.fail("schedule.peers", f"{schedule.peers} is more than the "
                                f"out-degree of node(s) {short[:5]}")
            return edges
        union = RoundGraphs.of(ids, (), directed, schedule).union()
        links = sorted(set(union if directed else ((min(a), max(a)) for a in union)))
        if given:
            written = sorted(e.pair for e in edges)
            if written != links:
                raise self.fail("edges", "must be the union of the schedule's graphs (or be "
                                         f"left out): {len(written)} written, {len(links)} in "
                                         "the union")
            return edges
        return tuple(TopologyEdge(u, v, directed=directed) for u, v in links)

    def nodes(self, parsed: Sequence[NodeFields]) -> tuple[TopologyNode, ...]:
        nodes: list[TopologyNode] = []
        first_index: dict[int, int] = {}
        addresses: dict[tuple[str, int], str] = {}
        dimension: tuple[int, str] | None = None
        for i, item in enumerate(parsed):
            node = _topology_node(item)
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

    def edges(self, parsed: Sequence[EdgeFields], ids: set[int], directed: bool = False,
              where: str = "edges") -> tuple[TopologyEdge, ...]:
        seen: dict[tuple[int, int], str] = {}
        edges: list[TopologyEdge] = []
        for i, item in enumerate(parsed):
            label = f"{where}[{i}] ({show(item.u)}, {show(item.v)})"
            for key, end in (("u", item.u), ("v", item.v)):
                if end not in ids:
                    raise self.fail(f"{label}: {key}", f"node {end} is not in nodes")
            if item.u == item.v:
                raise self.fail(label, "self-loop")
            edge = TopologyEdge(item.u, item.v, item.model_dump(include=set(LINK_ATTRIBUTES),
                                                            exclude_none=True), directed)
            if edge.pair in seen:
                raise self.fail(label, f"duplicate edge (same as {seen[edge.pair]})")
            seen[edge.pair] = label
            edges.append(edge)
        return tuple(edges)

    def check_connected(self, nodes: tuple[TopologyNode, ...],
                        edges: tuple[TopologyEdge, ...]) -> None:
        sizes = component_sizes([n.id for n in nodes], [e.pair for e in edges])
        if len(sizes) > 1:
            listed = ", ".join(map(str, sizes))
            raise self.fail(
                "edges", f"graph is disconnected: {len(sizes)} components of sizes {listed}"
            )


def component_sizes(ids: list[int], pairs: list[tuple[int, int]]) -> list[int]:
    """Sizes of the graph's connected components, largest first. A walk of our own, not
    networkx's: `dfl-launch slurm --submit` reads the topology before it queues the job, and
    importing networkx and numpy there would delay the job by a third of a second."""
    neighbours: dict[int, list[int]] = {i: [] for i in ids}
    for u, v in pairs:
        neighbours[u].append(v)
        neighbours[v].append(u)
    sizes, seen = [], set()
    for start in ids:
        if start in seen:
            continue
        seen.add(start)
        todo, size = [start], 0
        while todo:
            size += 1
            for other in neighbours[todo.pop()]:
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        sizes.append(size)
    return sorted(sizes, reverse=True)


def _topology_node(node: NodeFields) -> TopologyNode:
    """The node's spec; its attributes are the declared ones the file sets (validated, as JSON
    data, so that unset ones fall back to the reader's default) and, for a `FreeNode`, the free
    ones as written."""
    declared = set(type(node).model_fields) - set(NodeFields.model_fields)
    attrs = node.model_dump(mode="json", include=declared, exclude_unset=True) if declared else {}
    attrs.update(node.model_extra or {})
    return TopologyNode(node.id, node.host, node.port, node.device, node.position, attrs)
