"""The topology model, the loader's accepted forms, and write -> load round trips."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema  # type: ignore[import-untyped]  # no stubs in the dev extras
import numpy as np
import pytest
import yaml

from dfl_config.section import NonNegative, Section
from topologies import generators as gen
from topologies.errors import TopologyError
from topologies.loader import (
    SHIPPED_DIR,
    component_sizes,
    load_topology,
    parse_topology,
    resolve_topology_path,
    shipped_topologies,
)
from topologies.model import Topology, TopologyEdge, TopologyNode
from topologies.schema import topology_json_schema
from topologies.writer import dump_topology, write_topology

HAND_MADE = """\
name: lab
nodes:
  - {id: 10, host: 10.0.0.2, port: 7001, device: 'cuda:1', position: [0, 1], optimizer: sgd}
  - {id: 3, device: cpu, position: [1.5, 2], tasks: [seg, dep]}
  - {id: 7, port: 7001, device: auto, position: [2, 2]}
  - {id: 5, host: 10.0.0.3, position: [3, 3]}
edges:
  - [10, 3]
  - {u: 7, v: 3, weight: 0.5, latency_ms: 5, bandwidth_mbps: 100, loss: 0.1}
  - [5, 7]
"""


@pytest.fixture
def lab(tmp_path: Path) -> Topology:
    path = tmp_path / "lab.yaml"
    path.write_text(HAND_MADE, encoding="utf-8")
    return load_topology(path)


def test_hand_made_file_is_parsed_into_canonical_specs(lab: Topology) -> None:
    assert lab.name == "lab"
    assert lab.ids == (3, 5, 7, 10)
    assert lab.node(10) == TopologyNode(
        10, "10.0.0.2", 7001, "cuda:1", (0.0, 1.0), {"optimizer": "sgd"}
    )
    assert lab.node(3).attrs == {"tasks": ["seg", "dep"]}
    # The default host applies only to a node that fixes a port: 7001 is free on loopback.
    assert lab.node(7).address == ("127.0.0.1", 7001)
    assert lab.node(5).address is None
    assert [e.pair for e in lab.edges] == [(3, 7), (3, 10), (5, 7)]
    assert lab.edge(7, 3) == TopologyEdge(
        3, 7, {"weight": 0.5, "latency_ms": 5.0, "bandwidth_mbps": 100.0, "loss": 0.1}
    )


def test_graph_views_are_in_sorted_id_order(lab: Topology) -> None:
    assert [lab.index(i) for i in (3, 5, 7, 10)] == [0, 1, 2, 3]
    assert lab.neighbors(3) == [7, 10]
    assert lab.neighbors(7) == [3, 5]
    expected = np.array([[0, 0, 1, 1], [0, 0, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=float)
    np.testing.assert_array_equal(lab.adjacency(), expected)
    weighted = lab.adjacency(weighted=True)
    assert weighted[0, 2] == weighted[2, 0] == 0.5 and weighted[0, 3] == 1.0
    assert lab.diameter() == 3  # 10 - 3 - 7 - 5
    g = lab.to_networkx()
    assert g.nodes[10]["device"] == "cuda:1" and g.nodes[3]["pos"] == (1.5, 2.0)
    assert g.edges[3, 7]["latency_ms"] == 5.0


def test_unknown_node_or_edge_is_a_topology_error(lab: Topology) -> None:
    with pytest.raises(TopologyError, match="node 4 is not in the topology"):
        lab.neighbors(4)
    with pytest.raises(TopologyError, match="no edge between 10 and 5"):
        lab.edge(10, 5)


def test_write_then_load_gives_an_equal_topology(lab: Topology, tmp_path: Path) -> None:
    topologies = [
        lab,
        gen.random_geometric(12, 0.3, seed=4, dim=3),
        gen.erdos_renyi(25, 0.08, seed=2),
        gen.grid(3, 4),
    ]
    for topology in topologies:
        path = tmp_path / f"{topology.name}.yaml"
        write_topology(topology, path, header="a comment\nover two lines")
        loaded = load_topology(path)
        assert loaded == topology
        assert parse_topology(json.loads(json.dumps(topology.to_dict())), "x.json") == topology


def test_written_file_has_one_node_and_one_edge_per_line(lab: Topology) -> None:
    text = dump_topology(lab)
    assert "  - {id: 3, device: cpu, position: [1.5, 2.0], tasks: [seg, dep]}\n" in text
    assert "  - [3, 10]\n" in text
    assert (
        "  - {u: 3, v: 7, weight: 0.5, latency_ms: 5.0, bandwidth_mbps: 100.0, loss: 0.1}\n" in text
    )


def test_to_dict_is_canonical_whatever_the_input_order() -> None:
    a = Topology((TopologyNode(2), TopologyNode(0), TopologyNode(1)),
                 (TopologyEdge(2, 1), TopologyEdge(1, 0)))
    b = Topology((TopologyNode(0), TopologyNode(1), TopologyNode(2)),
                 (TopologyEdge(0, 1), TopologyEdge(1, 2)))
    assert a == b
    assert a.to_dict() == {
        "name": "topology",
        "nodes": [{"id": 0}, {"id": 1}, {"id": 2}],
        "edges": [[0, 1], [1, 2]],
    }


def test_accepted_forms(tmp_path: Path) -> None:
    path = tmp_path / "forms.yaml"
    text = (
        "nodes:\n"
        "  - &n0 {id: 0, device: cuda, optimizer: adam}\n"
        "  - {<<: *n0, id: 1}\n"
        "  - {id: 2, device: 'cuda:0'}\n"
        "edges: [[0, 1], {u: 1, v: 2}]\n"
    )
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())  # a UTF-8 byte-order mark is fine
    topology = load_topology(path)
    assert topology.name == "forms"  # the file stem when `name` is absent
    assert topology.node(1).attrs == {"optimizer": "adam"} and topology.node(1).device == "cuda"
    assert topology.generator is None


def test_single_node_needs_no_edges() -> None:
    topology = parse_topology({"nodes": [{"id": 4}]}, "one.yaml")
    assert topology.diameter() == 0 and topology.neighbors(4) == []


def test_resolve_topology_path(tmp_path: Path) -> None:
    local = tmp_path / "mine.yaml"
    local.write_text("nodes: [{id: 0}]\n")
    assert resolve_topology_path(local) == local
    assert resolve_topology_path("ring20") == SHIPPED_DIR / "ring20.yaml"
    assert resolve_topology_path("ring20.yaml") == SHIPPED_DIR / "ring20.yaml"
    with pytest.raises(TopologyError, match=r"^nope/ring20: no such file"):
        resolve_topology_path("nope/ring20")
    assert {"ring20", "er30", "er20-p05", "rgg20-r04", "rgg10", "complete10"} <= set(
        shipped_topologies()
    )


class Attributes(Section):
    """A caller's declared node attributes (the launcher declares its own)."""

    optimizer: str | None = None
    compute_ms: NonNegative = 0.0


NODES5 = [{"id": i} for i in range(5)]
PATH5 = [[0, 1], [1, 2], [2, 3], [3, 4]]


def problem(data: object, node_attributes: type[Section] | None = None) -> str:
    with pytest.raises(TopologyError) as info:
        parse_topology(data, "t.yaml", node_attributes)
    return str(info.value)


def test_misspelt_top_level_key_names_it_and_the_closest_key() -> None:
    data = {"nodes": NODES5, "egdes": PATH5}
    assert problem(data) == "t.yaml: egdes: unknown key (did you mean edges?)"


def test_misspelt_edge_key_names_the_edge_and_the_closest_key() -> None:
    edges = [*PATH5, {"u": 4, "v": 0, "latncy_ms": 5}]
    assert problem({"nodes": NODES5, "edges": edges}) == (
        "t.yaml: edges[4].latncy_ms: unknown key (did you mean latency_ms?)"
    )


def test_declared_node_attributes_refuse_a_misspelt_one() -> None:
    nodes = [*NODES5[:3], {"id": 3, "optimzer": "sgd"}, NODES5[4]]
    data = {"nodes": nodes, "edges": PATH5}
    assert problem(data, Attributes) == (
        "t.yaml: nodes[3].optimzer: unknown key (did you mean optimizer?)"
    )
    # The suggestion weighs the known node fields as much as the declared attributes.
    nodes[3] = {"id": 3, "devce": "cpu"}
    assert problem(data, Attributes) == "t.yaml: nodes[3].devce: unknown key (did you mean device?)"
    # Without a declaration (dfl-topology) the same key is a free attribute.
    nodes[3] = {"id": 3, "optimzer": "sgd"}
    assert parse_topology(data, "t.yaml").node(3).attrs == {"optimzer": "sgd"}


def test_declared_node_attributes_are_validated_and_only_the_set_ones_kept() -> None:
    nodes = [{"id": 0, "compute_ms": 25, "optimizer": "adam"}, {"id": 1, "device": "cpu"}]
    topology = parse_topology({"nodes": nodes, "edges": [[0, 1]]}, "t.yaml", Attributes)
    # Unset attributes stay absent, so a reader's own fallback applies to them.
    assert topology.node(0).attrs == {"compute_ms": 25.0, "optimizer": "adam"}
    assert topology.node(1).attrs == {} and topology.node(1).device == "cpu"
    nodes[1] = {"id": 1, "compute_ms": -1}
    assert problem({"nodes": nodes, "edges": [[0, 1]]}, Attributes) == (
        "t.yaml: nodes[1].compute_ms: must be >= 0, got -1"
    )


def test_load_topology_takes_the_declared_node_attributes(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("nodes: [{id: 0, compute_ms: 3}, {id: 1, computems: 4}]\nedges: [[0, 1]]\n")
    with pytest.raises(TopologyError) as info:
        load_topology(path, Attributes)
    assert str(info.value) == f"{path}: nodes[1].computems: unknown key (did you mean compute_ms?)"
    assert load_topology(path).node(1).attrs == {"computems": 4}


def test_an_attribute_model_may_not_redeclare_a_node_field() -> None:
    class Clash(Section):
        device: str = "cpu"

    with pytest.raises(TypeError, match="redeclares node fields device"):
        parse_topology({"nodes": [{"id": 0}]}, "t.yaml", Clash)


def test_a_key_that_is_not_a_string_is_named_as_written() -> None:
    # YAML reads `on:` as true and `1:` as an integer.
    assert problem({"nodes": [{"id": 0, True: 1}]}) == "t.yaml: nodes[0]: key True is not a string"


def test_a_null_link_attribute_is_an_absent_one() -> None:
    edges = [{"u": 0, "v": 1, "weight": None, "latency_ms": 2}]
    topology = parse_topology({"nodes": NODES5[:2], "edges": edges}, "t.yaml")
    assert topology.edge(0, 1).attrs == {"latency_ms": 2.0}


def shipped_files() -> list[Path]:
    return sorted(SHIPPED_DIR.glob("*.yaml"))


@pytest.mark.parametrize("node_attributes", [None, Attributes])
def test_json_schema_accepts_every_shipped_file(node_attributes: type[Section] | None) -> None:
    schema = topology_json_schema(node_attributes)
    validator = jsonschema.Draft202012Validator(schema)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert shipped_files()
    for path in shipped_files():
        validator.validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    hand_made = yaml.safe_load(HAND_MADE)
    if node_attributes is None:  # `tasks` is a free attribute, declared by no model here
        validator.validate(hand_made)


@pytest.mark.parametrize("node_attributes", [None, Attributes])
def test_json_schema_rejects_a_misspelt_edge_key(node_attributes: type[Section] | None) -> None:
    validator = jsonschema.Draft202012Validator(topology_json_schema(node_attributes))
    good = {"nodes": NODES5, "edges": [*PATH5, {"u": 4, "v": 0, "latency_ms": 5}]}
    validator.validate(good)
    bad = {"nodes": NODES5, "edges": [*PATH5, {"u": 4, "v": 0, "latncy_ms": 5}]}
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)


def test_json_schema_admits_extra_node_keys_only_without_a_declaration() -> None:
    data = {"nodes": [{"id": 0, "optimzer": "sgd"}]}
    jsonschema.validate(data, topology_json_schema(None))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, topology_json_schema(Attributes))
    declared = {"nodes": [{"id": 0, "optimizer": "sgd"}]}
    jsonschema.validate(declared, topology_json_schema(Attributes))


def test_a_disconnected_graph_is_refused_with_its_component_sizes_largest_first() -> None:
    text = ("nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}, {id: 4}, {id: 5}]\n"
            "edges: [[0, 1], [2, 3], [3, 4]]\n")
    with pytest.raises(TopologyError, match=r"edges: graph is disconnected: 3 components of "
                                            r"sizes 3, 2, 1$"):
        parse_topology(yaml.safe_load(text), "t.yaml")
    ring = gen.ring(7)
    assert component_sizes(list(ring.ids), [e.pair for e in ring.edges]) == [7]
