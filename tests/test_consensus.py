"""Max-consensus over real Comm instances (one thread per node, inproc transport)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import networkx as nx
import numpy as np
import pytest

from dfl_node.comm.channel import Comm, Received
from dfl_node.ledgers.traffic import Ledger
from dfl_node.wire.codec import encode
from dfl_node.wire.tags import Tag
from protocols.sdk import Payload
from protocols.toolkit.max_consensus import CONSENSUS_KIND, Step, central_argmax, max_consensus
from tests.test_comm import inproc_transports, run_mesh
from topologies.generators import erdos_renyi, grid, random_geometric, ring
from topologies.model import Topology

Graph = dict[int, tuple[int, ...]]
PAIR_BITS = {"psi": 37}  # eq. (19)'s b_loss + ceil(log2 n) for n = 20


def sub_rounds(comm: Comm, round_: int, sent: list[tuple[int, Payload]] | None = None) -> Step:
    """Max-consensus's sub-rounds straight on a Comm (the protocols run them on the SDK's
    Exchange, which adds the ledger and clock duties): the pair's schema, then one exchange
    per sub-round; each payload is kept in `sent`."""
    comm.set_schema("psi", {"value": ("float32", (1,)), "id": ("int64", (1,))})

    def step(k: int, payload: Payload) -> dict[int, Received]:
        if sent is not None:
            sent.append((k, payload))
        return comm.exchange(Tag(CONSENSUS_KIND, round_, "psi", step=k), payload.tensors)

    return step


def adjacency(topology: Topology) -> Graph:
    return {i: tuple(topology.neighbors(i)) for i in topology.ids}


def run_consensus(
    graph: Graph,
    values: Mapping[int, float],
    rounds: int,
    tie_break: str = "larger_id",
    ledgers: Mapping[int, Ledger] | None = None,
) -> dict[int, tuple[float, int]]:
    def program(comm: Comm) -> tuple[float, int]:
        comm.round = 3
        return max_consensus(sub_rounds(comm, 3), comm.node_id, values[comm.node_id], rounds,
                             pair_bits=PAIR_BITS, tie_break=tie_break)

    return run_mesh(inproc_transports(graph), graph, program, ledgers)


def ball_argmax(graph: Graph, values: Mapping[int, float], node: int, k: int, tie: str) -> int:
    """What node `node` must hold after k sub-rounds: the argmax over its k-hop ball."""
    ball = nx.single_source_shortest_path_length(nx.Graph(graph), node, cutoff=k)
    return central_argmax({j: values[j] for j in ball}, tie)


GRAPHS = {
    "ring20": ring(20),
    "er20": erdos_renyi(20, 0.2, seed=4),
    "rgg20": random_geometric(20, 0.4, seed=2),
    "grid4x5": grid(4, 5),
}


@pytest.mark.parametrize("tie_break", ["larger_id", "smaller_id"])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_diameter_rounds_select_the_central_argmax_everywhere(name: str, tie_break: str) -> None:
    topology = GRAPHS[name]
    graph = adjacency(topology)
    rng = np.random.default_rng(len(name))
    values = {i: float(rng.exponential()) for i in graph}
    results = run_consensus(graph, values, topology.diameter(), tie_break)
    winner = central_argmax(values, tie_break)
    assert set(results.values()) == {(float(np.float32(values[winner])), winner)}


@pytest.mark.parametrize("tie_break", ["larger_id", "smaller_id"])
def test_exact_float32_ties_follow_the_tie_rule(tie_break: str) -> None:
    """Three nodes tie for the max on a grid; two of them differ only below float32 precision."""
    graph = adjacency(GRAPHS["grid4x5"])
    values = {i: 0.25 for i in graph}
    values |= {3: 1.0, 11: 1.0, 16: 1.0 + 1e-12, 7: 0.999999}
    results = run_consensus(graph, values, GRAPHS["grid4x5"].diameter(), tie_break)
    expected = 16 if tie_break == "larger_id" else 3
    assert central_argmax(values, tie_break) == expected
    assert set(results.values()) == {(1.0, expected)}


def test_all_equal_values_select_the_extreme_id() -> None:
    graph = adjacency(GRAPHS["er20"])
    values = dict.fromkeys(graph, 0.5)
    for tie_break, expected in (("larger_id", 19), ("smaller_id", 0)):
        results = run_consensus(graph, values, GRAPHS["er20"].diameter(), tie_break)
        assert {node for _, node in results.values()} == {expected}


@pytest.mark.parametrize("rounds", [1, 2, 4])
def test_fewer_rounds_than_the_diameter_leave_local_maxima(rounds: int) -> None:
    """On a ring with K < diam, every node holds its K-ball's max and several self-select."""
    graph = adjacency(GRAPHS["ring20"])
    values = {i: i % 10 + i / 100 for i in graph}  # peaks at 9 and 19, 10 hops apart
    results = run_consensus(graph, values, rounds)
    for node, (value, selected) in results.items():
        assert selected == ball_argmax(graph, values, node, rounds, "larger_id")
        assert value == float(np.float32(values[selected]))
    self_selected = [node for node, (_, selected) in results.items() if selected == node]
    assert self_selected == [9, 19]  # two nodes would take the fairness step


def test_zero_rounds_return_the_own_float32_pair_without_messages() -> None:
    graph = adjacency(ring(4))
    values = {i: 0.1 * i for i in graph}
    ledgers = {i: Ledger(i) for i in graph}
    results = run_consensus(graph, values, 0, ledgers=ledgers)
    assert results == {i: (float(np.float32(values[i])), i) for i in graph}
    assert all(ledger.totals("data")["sent"]["messages"] == 0 for ledger in ledgers.values())


def test_consensus_traffic_is_data_on_its_own_kind() -> None:
    """One (float32, int64) pair per directed edge per sub-round, counted as data."""
    topology = GRAPHS["rgg20"]
    graph = adjacency(topology)
    ledgers = {i: Ledger(i) for i in graph}
    rounds = topology.diameter()
    run_consensus(graph, {i: float(i) for i in graph}, rounds, ledgers=ledgers)
    for i, ledger in ledgers.items():
        sent = ledger.totals("data")["sent"]
        assert (sent["messages"], sent["payload_bytes"]) == (
            rounds * len(graph[i]),
            12 * rounds * len(graph[i]),
        )
        assert ledger.rejected == Counter()
    assert Tag("cons", 0).is_control is False


def test_every_sub_round_sends_one_pair_stating_its_bits() -> None:
    """K sub-rounds, each one payload of one (float32, int64) pair that states eq. (19)'s
    b_loss + ceil(log2 n) bits, which the SDK's exchange charges on every link it is sent on."""
    topology = GRAPHS["er20"]
    graph = adjacency(topology)
    rounds = topology.diameter()
    sent: dict[int, list[tuple[int, Payload]]] = {i: [] for i in graph}

    def program(comm: Comm) -> tuple[float, int]:
        comm.round = 5
        return max_consensus(sub_rounds(comm, 5, sent[comm.node_id]), comm.node_id,
                             float(comm.node_id), rounds, pair_bits=PAIR_BITS)

    run_mesh(inproc_transports(graph), graph, program)
    for payloads in sent.values():
        assert [k for k, _ in payloads] == list(range(rounds))
        assert all(dict(p.bits) == PAIR_BITS and p.nbytes == 12 for _, p in payloads)


def test_malformed_pairs_are_refused_even_if_buffered_early() -> None:
    """A neighbour's bad pair that arrived before the schema was set is dropped, not used."""
    graph = {0: (1,), 1: (0,)}
    ledgers = {i: Ledger(i) for i in graph}

    def program(comm: Comm) -> tuple[float, int]:
        comm.round = 0
        if comm.node_id == 1:
            bad = {"value": np.array([9.0]), "id": np.array([1], np.int64)}  # float64
            comm.transport.send(0, encode(1, Tag("cons", 0, "psi", step=0), bad))
            comm.barrier()
            return max_consensus(sub_rounds(comm, 0), 1, 2.0, 1, pair_bits=PAIR_BITS)
        comm.barrier()  # the bad message is buffered by now (per-connection order)
        return max_consensus(sub_rounds(comm, 0), 0, 1.0, 1, pair_bits=PAIR_BITS)

    results = run_mesh(inproc_transports(graph), graph, program, ledgers)
    assert results == {0: (2.0, 1), 1: (2.0, 1)}
    assert ledgers[0].rejected == Counter(schema_mismatch=1)


def test_central_argmax_orders_nan_first_and_signed_zeros_as_equal() -> None:
    assert central_argmax({0: 1.0, 1: float("nan"), 2: float("inf")}) == 1
    assert central_argmax({0: float("inf"), 1: 3.0}) == 0
    assert central_argmax({4: -0.0, 2: 0.0}, "larger_id") == 4
    assert central_argmax({4: -0.0, 2: 0.0}, "smaller_id") == 2
    with pytest.raises(ValueError, match="tie_break"):
        central_argmax({0: 1.0}, "random")


def test_bad_arguments_fail_before_any_message() -> None:
    graph = {0: (1,), 1: (0,)}

    def program(comm: Comm) -> list[str]:
        errors = []
        for kwargs in ({"rounds": -1}, {"rounds": 1, "tie_break": "lowest"}):
            with pytest.raises(ValueError) as info:
                max_consensus(sub_rounds(comm, 0), comm.node_id, 1.0, pair_bits=PAIR_BITS,
                              **kwargs)
            errors.append(str(info.value))
        return errors

    results = run_mesh(inproc_transports(graph), graph, program)
    assert all("rounds" in e[0] and "tie_break" in e[1] for e in results.values())
