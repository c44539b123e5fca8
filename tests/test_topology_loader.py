"""The topology model, the loader's accepted forms, and write -> load round trips."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from topologies import generators as gen
from topologies.errors import TopologyError
from topologies.loader import (
    SHIPPED_DIR,
    load_topology,
    parse_topology,
    resolve_topology_path,
    shipped_topologies,
)
from topologies.model import EdgeSpec, NodeSpec, Topology
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
    assert lab.node(10) == NodeSpec(
        10, "10.0.0.2", 7001, "cuda:1", (0.0, 1.0), {"optimizer": "sgd"}
    )
    assert lab.node(3).attrs == {"tasks": ["seg", "dep"]}
    # The default host applies only to a node that fixes a port: 7001 is free on loopback.
    assert lab.node(7).address == ("127.0.0.1", 7001)
    assert lab.node(5).address is None
    assert [e.pair for e in lab.edges] == [(3, 7), (3, 10), (5, 7)]
    assert lab.edge(7, 3) == EdgeSpec(
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
    a = Topology((NodeSpec(2), NodeSpec(0), NodeSpec(1)), (EdgeSpec(2, 1), EdgeSpec(1, 0)))
    b = Topology((NodeSpec(0), NodeSpec(1), NodeSpec(2)), (EdgeSpec(0, 1), EdgeSpec(1, 2)))
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
