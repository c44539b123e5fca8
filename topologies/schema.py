"""The topology file as typed models: what each key may hold, for the loader and for editors.

`TopologyFile` is the file of `dfl-topology`, where node keys beyond `NodeFields` are free
attributes that nothing here can check. A caller that knows which attributes exist (the launcher:
those its runtime and protocols read) declares them as a `Section` and passes it as
`node_attributes`; the nodes of `file_model(node_attributes)` then refuse any other key, so a
misspelt attribute is an error with a suggestion instead of a silently ignored setting.

Each value check raises the reason in the loader's words (`must be an integer in 1..65535, got
'abc'`) before pydantic's own coercion runs, so nothing YAML merely converts (`true` for 1, the
text '5' for 5) gets through; the pydantic constraints beside it are there for the JSON Schema.
Rules that span several nodes or edges (duplicates, unknown ends, connectivity) are the loader's.
"""

from __future__ import annotations

import functools
import math
import re
import reprlib
from collections.abc import Callable
from types import GenericAlias
from typing import Annotated, Any, Literal, cast

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StringConstraints,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from dfl_config.limits import MAX_NAME_CHARS
from dfl_config.section import Section

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
DEVICE_RE = re.compile(r"cpu|cuda|cuda:\d+|auto")


# A bounded repr: YAML aliases can make a small file a value of billions of elements (the
# billion laughs), whose plain repr took 59 s and 880 MB before the one-line refusal.
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxtuple = 4, 6, 4, 6
_SHORT.maxstring = _SHORT.maxother = 60


def show(value: Any) -> str:
    """A short one-line rendering of an offending value for messages."""
    text = _SHORT.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _must_be(test: Callable[[Any], bool], wording: str) -> BeforeValidator:
    """Refuse a value unless `test` holds, as `must be <wording>, got <value>`."""

    def check(value: Any) -> Any:
        if not test(value):
            raise ValueError(f"must be {wording}, got {show(value)}")
        return value

    return BeforeValidator(check)


NodeId = Annotated[
    int, Field(ge=0), _must_be(lambda x: _is_int(x) and x >= 0, "a non-negative integer")
]
EdgeEnd = Annotated[int, _must_be(_is_int, "a node id (an integer)")]
Host = Annotated[
    str,
    StringConstraints(pattern=r"^\S+$"),
    _must_be(
        lambda x: isinstance(x, str) and bool(x) and not any(c.isspace() for c in x),
        "a host name or address",
    ),
]
Port = Annotated[
    int, Field(ge=1, le=65535), _must_be(lambda x: _is_int(x) and 1 <= x <= 65535,
                                         "an integer in 1..65535")
]
Device = Annotated[
    str,
    StringConstraints(pattern=rf"^({DEVICE_RE.pattern})$"),
    _must_be(lambda x: isinstance(x, str) and bool(DEVICE_RE.fullmatch(x)),
             "cpu, cuda, cuda:K or auto"),
]
Position = Annotated[
    tuple[float, ...],
    Field(min_length=2, max_length=3),
    _must_be(lambda x: isinstance(x, list) and len(x) in (2, 3) and all(map(_is_number, x)),
             "a list of 2 or 3 finite numbers"),
]
# A zero weight is refused: an edge that exists for communication but not for mixing is a
# contradiction; leave the edge out instead.
Weight = Annotated[float, Field(gt=0), _must_be(lambda x: _is_number(x) and x > 0,
                                                "a positive number")]
LatencyMs = Annotated[float, Field(ge=0), _must_be(lambda x: _is_number(x) and x >= 0,
                                                   "a non-negative number")]
BandwidthMbps = Annotated[float, Field(gt=0), _must_be(lambda x: _is_number(x) and x > 0,
                                                       "a positive number")]
Loss = Annotated[float, Field(ge=0, lt=1), _must_be(lambda x: _is_number(x) and 0 <= x < 1,
                                                    "a number in [0, 1)")]
Name = Annotated[
    str, Field(min_length=1, max_length=MAX_NAME_CHARS),
    _must_be(lambda x: isinstance(x, str) and 0 < len(x) <= MAX_NAME_CHARS,
             f"a non-empty string of at most {MAX_NAME_CHARS} characters"),
]


class NodeFields(Section):
    """The keys every node may have, whoever reads the file."""

    id: NodeId
    """The node's id: a non-negative integer, unique in the file (gaps allowed)."""
    host: Host | None = None
    """Where the node runs; 127.0.0.1 when only a port is given."""
    port: Port | None = None
    """The node's fixed port; no two nodes on one host:port."""
    device: Device | None = None
    """cpu, cuda, cuda:K or auto."""
    position: Position | None = None
    """2 or 3 coordinates, the same number for every node that has one."""

    @model_validator(mode="before")
    @classmethod
    def _a_mapping(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError(f"must be a mapping with an id, got {show(data)}")
        return data


class FreeNode(NodeFields):
    """A node of `dfl-topology`'s file: keys beyond `NodeFields` are free attributes."""

    model_config = ConfigDict(extra="allow")


class EdgeFields(Section):
    """An edge written as a mapping; `[u, v]` is the same edge with no link attributes."""

    u: EdgeEnd
    """One end: the id of a node in `nodes`."""
    v: EdgeEnd
    """The other end, not `u` (no self-loops)."""
    weight: Weight | None = None
    """Mixing weight (> 0), read by the `weighted` scheme; 1 when absent."""
    latency_ms: LatencyMs | None = None
    """The link's one-way latency for the virtual clock (>= 0)."""
    bandwidth_mbps: BandwidthMbps | None = None
    """The link's bandwidth for the virtual clock (> 0)."""
    loss: Loss | None = None
    """The link's message loss probability, in [0, 1)."""


LINK_ATTRIBUTES = tuple(k for k in EdgeFields.model_fields if k not in ("u", "v"))


def _edge_as_mapping(value: Any) -> Any:
    """`[u, v]` is short for `{u: u, v: v}`, so both spellings meet the same checks and paths."""
    if isinstance(value, list) and len(value) == 2:
        return {"u": value[0], "v": value[1]}
    if isinstance(value, dict):
        return value
    raise ValueError(f"must be a pair [u, v] or a mapping {{u, v, ...}}, got {show(value)}")


class _PairOrMapping:
    """The JSON Schema of an edge: a `[u, v]` pair or an `EdgeFields` mapping."""

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        pair = {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "integer"}],
            "minItems": 2,
            "maxItems": 2,
        }
        return {"anyOf": [pair, handler(core_schema)]}


Edge = Annotated[EdgeFields, BeforeValidator(_edge_as_mapping), _PairOrMapping]


Pair = Annotated[
    tuple[int, int],
    _must_be(lambda x: isinstance(x, list) and len(x) == 2 and all(map(_is_int, x)),
             "a pair [u, v] of node ids"),
]


class ScheduleFields(Section):
    """How the arcs change from round to round (topologies/schedules.py)."""

    kind: Literal["cycle", "one-peer-exponential", "random-peers"]
    """cycle: `graphs` in turn; one-peer-exponential: i -> i + 2^(r mod ceil(log2 n));
    random-peers: each node sends to `peers` of its out-neighbours in `edges`, drawn per round."""
    graphs: list[list[Pair]] | None = None
    """cycle: the round graphs, each a list of [u, v] pairs (read as `directed` says)."""
    peers: Annotated[int, Field(ge=1), _must_be(lambda x: _is_int(x) and x >= 1,
                                                "a positive integer")] | None = None
    """random-peers: how many peers each node sends to per round (at most its out-degree)."""

    @model_validator(mode="after")
    def _fields_of_kind(self) -> ScheduleFields:
        wanted = {"cycle": "graphs", "random-peers": "peers"}.get(self.kind)
        for name in ("graphs", "peers"):
            given = getattr(self, name) is not None
            if given and name != wanted:
                raise ValueError(f"{name}: not a key of kind {self.kind}")
            if not given and name == wanted:
                raise ValueError(f"kind {self.kind} needs {name}")
        if self.graphs == []:
            raise ValueError("graphs: a cycle needs at least one graph")
        return self


class TopologyFile(Section):
    """A topology file: its nodes and edges, optionally a name and how it was generated."""

    name: Name | None = None
    """The topology's name; the file name without its suffix when absent."""
    nodes: list[FreeNode] = Field(min_length=1)
    """At least one node."""
    edges: list[Edge] | None = None
    """Undirected edges, each `[u, v]` or `{u, v, weight, latency_ms, bandwidth_mbps, loss}`;
    the graph they make must be connected."""
    generator: dict[Any, Any] | None = None
    """How the file was made (generator name, params, seed, repair), kept as written."""
    directed: Annotated[bool, _must_be(lambda x: isinstance(x, bool), "true or false")] | None \
        = None
    """true: every edge [u, v] is an arc, u sends to v (the union must be strongly connected)."""
    schedule: ScheduleFields | None = None
    """Arcs that change per round (docs/topologies.md#graph-schedules); `edges` are then the
    union of every round's arcs (derived when absent) or, for random-peers, the graph drawn
    from."""

    @field_validator("nodes", mode="before")
    @classmethod
    def _node_list(cls, value: Any) -> Any:
        if value is None or value == []:
            raise ValueError("no nodes (a topology needs at least one)")
        if not isinstance(value, list):
            raise ValueError(f"must be a list of node mappings, got {show(value)}")
        return value

    @field_validator("edges", mode="before")
    @classmethod
    def _edge_list(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, list):
            raise ValueError(f"must be a list of edges, got {show(value)}")
        return value

    @field_validator("generator", mode="before")
    @classmethod
    def _generator_mapping(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"must be a mapping, got {show(value)}")
        return value


@functools.cache
def node_model(node_attributes: type[Section] | None = None) -> type[NodeFields]:
    """The model of one node: `FreeNode` without `node_attributes`, else `NodeFields` and the
    declared attributes together, so that any other key is unknown and the suggestion for it
    considers both."""
    if node_attributes is None:
        return FreeNode
    clash = sorted(set(node_attributes.model_fields) & set(NodeFields.model_fields))
    if clash:
        raise TypeError(
            f"{node_attributes.__name__} redeclares node fields {', '.join(clash)}: an attribute"
            " model declares only the attributes beyond NodeFields"
        )
    node = create_model("Node", __base__=(node_attributes, NodeFields), __module__=__name__)
    return cast(type[NodeFields], node)


@functools.cache
def file_model(node_attributes: type[Section] | None = None) -> type[TopologyFile]:
    """The model of a whole file whose nodes are `node_model(node_attributes)`."""
    if node_attributes is None:
        return TopologyFile
    nodes = (GenericAlias(list, (node_model(node_attributes),)), TopologyFile.model_fields["nodes"])
    return create_model(
        "TopologyFile", __base__=TopologyFile, __module__=__name__, nodes=cast(Any, nodes)
    )


def topology_json_schema(node_attributes: type[Section] | None = None) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of topology files, for editors and other tools: with
    `node_attributes`, nodes admit only `NodeFields` and those attributes; without, any extra
    node key. Cross-node rules (unique ids, known edge ends, connectivity) are beyond it."""
    return {"$schema": JSON_SCHEMA_DIALECT, **file_model(node_attributes).model_json_schema()}
