"""Directed and time-varying topologies: the file (directed arcs, graph schedules and their
one-line refusals), the arcs and weights of every round the plan computes, and D-PSGD on the
one-peer exponential graph of 16 nodes (Ying et al. 2021)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness import Exited, launch_ok
from topologies.errors import TopologyError
from topologies.generators import one_peer_exponential
from topologies.loader import load_topology, parse_topology, resolve_topology_path
from topologies.schedules import RoundGraphs
from topologies.writer import dump_topology

SYNTHETIC = ("--dataset", "synthetic", "--partition", "iid")


def nodes(n: int) -> list[dict[str, int]]:
    return [{"id": i} for i in range(n)]


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


EXPO16 = ("name: expo16\ndirected: true\nschedule: {kind: one-peer-exponential}\n"
          f"nodes: [{', '.join(f'{{id: {i}}}' for i in range(16))}]\n")


def test_the_one_peer_exponential_graph_sends_to_i_plus_2_to_the_k() -> None:
    shipped = load_topology(resolve_topology_path("expo16"))
    assert shipped == parse_topology(shipped.to_dict(), "expo16.yaml")
    assert dataclasses.replace(shipped, generator=None, name="e") == parse_topology(
        {"name": "e", "nodes": nodes(16), "directed": True,
         "schedule": {"kind": "one-peer-exponential"}}, "e.yaml")  # edges derived alike
    assert one_peer_exponential(16) == dataclasses.replace(shipped, name="topology")
    graphs = shipped.round_graphs()
    for r in range(6):
        hop = 2 ** (r % 4)  # tau = log2 16
        assert graphs.arcs(r, seed=0) == tuple(sorted((i, (i + hop) % 16) for i in range(16)))
        assert graphs.in_neighbors(5, r, 0) == [(5 - hop) % 16]
        assert graphs.weight_row(5, r, 0) == dict(sorted({5: 0.5, (5 - hop) % 16: 0.5}.items()))
    assert len(graphs.union()) == 16 * 4


def test_a_directed_file_keeps_its_arcs_and_round_trips(tmp_path: Path) -> None:
    text = "directed: true\nnodes: [{id: 0}, {id: 1}, {id: 2}]\nedges: [[2, 0], [0, 1], [1, 2]]\n"
    topology = load_topology(write(tmp_path, "tri", text))
    assert [e.pair for e in topology.edges] == [(0, 1), (1, 2), (2, 0)]
    graphs = topology.round_graphs()
    assert graphs.out_neighbors(2, 0, 0) == [0] and graphs.in_neighbors(2, 0, 0) == [1]
    assert topology.neighbors(0) == [1, 2]  # the links a run connects: both ends of each arc
    again = write(tmp_path, "again", dump_topology(topology))
    assert load_topology(again) == topology


def test_a_cycle_of_graphs_derives_its_union_and_mixes_metropolis_per_round() -> None:
    topology = parse_topology({"nodes": nodes(4), "schedule": {
        "kind": "cycle", "graphs": [[[0, 1], [2, 3]], [[1, 2], [3, 0], [0, 2]]]}}, "c.yaml")
    assert [e.pair for e in topology.edges] == [(0, 1), (0, 2), (0, 3), (1, 2), (2, 3)]
    graphs = topology.round_graphs()
    assert graphs.arcs(2, 0) == ((0, 1), (1, 0), (2, 3), (3, 2))
    # round 1's degrees: 2 (nodes 0, 2) and 1 (nodes 1, 3): W_ij = 1 / (1 + max(d_i, d_j))
    assert graphs.weight_row(0, 1, 0) == pytest.approx({0: 1 / 3, 2: 1 / 3, 3: 1 / 3})
    assert graphs.weight_row(3, 1, 0) == pytest.approx({0: 1 / 3, 3: 2 / 3})
    assert list(graphs.weight_row(0, 1, 0)) == [0, 2, 3]


def test_random_peers_draw_s_of_the_candidates_per_round_seed_and_node() -> None:
    complete = [[i, j] for i in range(8) for j in range(i + 1, 8)]
    graphs = parse_topology({"nodes": nodes(8), "edges": complete,
                             "schedule": {"kind": "random-peers", "peers": 3}},
                            "el.yaml").round_graphs()
    rounds = [graphs.arcs(r, seed=0) for r in range(4)]
    for arcs in rounds:
        assert all(len(graphs.out_of(arcs, i)) == 3 for i in range(8))
    assert len(set(rounds)) == 4  # a new draw every round
    assert graphs.arcs(1, seed=1) != rounds[1]  # and per seed
    fresh = RoundGraphs.from_topology(parse_topology(
        {"nodes": nodes(8), "edges": complete, "schedule": {"kind": "random-peers", "peers": 3}},
        "el.yaml").to_dict())
    assert [fresh.arcs(r, 0) for r in range(4)] == rounds  # what a resumed node computes


@pytest.mark.parametrize(("data", "reason"), [
    ({"directed": True, "edges": [[0, 1], [1, 2]]}, "not strongly connected"),
    ({"directed": "yes", "edges": [[0, 1], [1, 2]]}, "directed: must be true or false"),
    ({"schedule": {"kind": "ring"}}, "schedule.kind: input should be"),
    ({"schedule": {"kind": "cycle"}}, "kind cycle needs graphs"),
    ({"schedule": {"kind": "cycle", "graphs": [[[0, 1], [1, 2]]], "peers": 1}},
     "peers: not a key of kind cycle"),
    ({"schedule": {"kind": "cycle", "graphs": [[[0, 1], [1, 7]]]}},
     "schedule.graphs[0][1] (1, 7): v: node 7 is not in nodes"),
    ({"edges": [[0, 1]], "schedule": {"kind": "cycle", "graphs": [[[0, 1], [1, 2]]]}},
     "edges: must be the union of the schedule's graphs"),
    ({"schedule": {"kind": "random-peers", "peers": 1}}, "random-peers draws"),
    ({"edges": [[0, 1], [1, 2]], "schedule": {"kind": "random-peers", "peers": 2}},
     "2 is more than the out-degree of node(s) [0, 2]"),
])
def test_bad_schedules_are_one_line_errors(data: dict[str, object], reason: str) -> None:
    with pytest.raises(TopologyError) as err:
        parse_topology({"nodes": nodes(3), **data}, "bad.yaml")
    assert reason in str(err.value) and "\n" not in str(err.value)


def test_dfl_topology_show_says_directed_and_refuses_a_bad_schedule(
        tmp_path: Path, entry: Callable[..., Exited]) -> None:
    done = entry("dfl-topology", "show", write(tmp_path, "expo16", EXPO16))
    assert done.code == 0 and "directed: yes, schedule: one-peer-exponential" in done.out
    bad = write(tmp_path, "bad", EXPO16.replace("one-peer-exponential", "two-peer"))
    done = entry("dfl-topology", "show", bad)
    assert done.code == 2 and done.out == "" and len(done.err.strip().splitlines()) == 1


@pytest.mark.parametrize(("args", "reason"), [
    (("--protocol", "dsgt"), "dsgt runs on one undirected graph"),
    (("--protocol", "d-psgd", "--set", "mixing=max-degree"), "mixing: topology expo16"),
    (("--protocol", "d-psgd", "--set", "schedule=tdma"), "schedule: topology expo16"),
    (("--protocol", "d-psgd", "--on-failure", "continue"), "--on-failure continue: topology"),
])
def test_what_a_time_varying_graph_cannot_run_with_is_exit_2(
        tmp_path: Path, entry: Callable[..., Exited], args: tuple[str, ...], reason: str) -> None:
    done = entry("dfl-launch", "--topology", write(tmp_path, "expo16", EXPO16), *args,
                 *SYNTHETIC, "--transport", "inproc", "--out", str(tmp_path / "run"))
    lines = done.err.strip().splitlines()
    assert done.code == 2 and len(lines) == 1 and reason in lines[0], done.err


def test_dpsgd_runs_on_the_one_peer_exponential_graph_of_16_nodes(tmp_path: Path) -> None:
    """Each node's data messages of round r go to i + 2^r alone (the ledger's cells), its
    formula bits likewise, and D-PSGD mixes 1/2 own, 1/2 the in-peer's model."""
    run = tmp_path / "run"
    summary = launch_ok(run, write(tmp_path, "expo16", EXPO16), "d-psgd", "--transport",
                        "inproc", "--rounds", "2", "--set", "model={name: linear}",
                        "--set", "local_steps=1", "--set", "cycle_metrics={params_every: 1}",
                        *SYNTHETIC)
    assert summary["status"] == "ok" and len(summary["nodes"]) == 16
    ledger = json.loads((run / "ledger.json").read_text())
    for node in range(16):
        data = {(c["round"], c["dst"]) for c in ledger[str(node)]["cells"]
                if c["traffic"] == "data" and c["src"] == node}
        assert data == {(0, (node + 1) % 16), (1, (node + 2) % 16)}
    plan = json.loads((run / "plan.json").read_text())
    assert plan["weights"] == []  # per round, from the schedule
    assert summary["spectral"] == {} and summary["consensus_gap"] > 0  # no one matrix to show


def test_the_comm_sends_on_the_rounds_out_arcs_and_gathers_from_its_in_arcs() -> None:
    """A directed triangle that turns round every round: in round r node i sends to
    i + 1 + r mod 2 alone and gathers from the one node that sends to it; data goes only
    where the round's arcs say, the closing barrier still over every link."""
    from dfl_node.comm.channel import Comm
    from dfl_node.ledgers.traffic import Ledger
    from tests.test_comm import (
        SCHEMAS,
        TRIANGLE,
        gossip_tag,
        inproc_transports,
        run_mesh,
        value,
    )

    def program(comm: Comm) -> list[dict[int, object]]:
        got = []
        for r in range(4):
            comm.round = r
            to = (comm.node_id + 1 + r % 2) % 3
            frm = (comm.node_id - 1 - r % 2) % 3
            comm.set_round_links([to], [frm])
            theirs = comm.exchange(gossip_tag(r), {"w": value(comm.node_id, r)})
            got.append({j: bool(t["w"].equal(value(j, r))) for j, t in theirs.items()})
            comm.end_round()
        with pytest.raises(ValueError, match="not among its links"):
            comm.set_round_links([comm.node_id], [])
        return got

    ledgers = {i: Ledger(i) for i in TRIANGLE}
    results = run_mesh(inproc_transports(TRIANGLE), TRIANGLE, program, ledgers, schemas=SCHEMAS)
    for i, rounds in results.items():
        assert rounds == [{(i - 1 - r % 2) % 3: True} for r in range(4)]
        sent = {(c["round"], c["dst"]) for c in ledgers[i].to_json()["cells"]
                if c["traffic"] == "data" and c["src"] == i}
        assert sent == {(r, (i + 1 + r % 2) % 3) for r in range(4)}
