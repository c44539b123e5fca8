"""exchange_optional and set_validator: silent nodes, end-of-step markers, common copies."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest
import torch

from dfl_node.comm.channel import Comm
from dfl_node.ledgers.traffic import Ledger
from dfl_node.wire.codec import WireLimits, encode
from dfl_node.wire.tags import Tag
from protocols.toolkit.compressors import Composed, TopK, Uniform
from protocols.toolkit.trigger import fires, threshold
from tests.test_comm import inproc_transports, link_headers, run_mesh, zmq_transports

P = 4096
PHASE = "model"
RING5 = {i: ((i - 1) % 5, (i + 1) % 5) for i in range(5)}
COMPRESSOR = Composed(TopK(ratio=0.02), Uniform(bits=8))
LIMITS = WireLimits(max_tensors=8, max_message_bytes=1 << 20)  # a sparse message has up to 5


def mesh(make: Callable, graph: dict, program: Callable, ledgers: dict | None = None) -> dict:
    transports = make(graph, LIMITS) if make is zmq_transports else make(graph)
    return run_mesh(transports, graph, program, ledgers, LIMITS)


def tag(r: int) -> Tag:
    return Tag("data", r, PHASE)


def with_validator(program: Callable[[Comm], object]) -> Callable[[Comm], object]:
    def wrapped(comm: Comm) -> object:
        comm.set_validator(PHASE, lambda tensors: COMPRESSOR.validate(tensors, P))
        return program(comm)

    return wrapped


@pytest.mark.parametrize("make", [inproc_transports, zmq_transports])
def test_silent_nodes_send_no_data_and_receivers_get_none(make: Callable) -> None:
    silent = {1, 3}
    ledgers = {i: Ledger(i) for i in RING5}
    sent = {i: COMPRESSOR.compress(torch.randn(P, generator=torch.Generator().manual_seed(i)))
            for i in RING5}  # fmt: skip

    def program(comm: Comm) -> dict[int, dict[str, torch.Tensor] | None]:
        me = comm.node_id
        return comm.exchange_optional(tag(0), None if me in silent else sent[me].tensors)

    results = mesh(make, RING5, with_validator(program), ledgers)
    for i, received in results.items():
        assert list(received) == sorted(RING5[i])
        for j, tensors in received.items():
            link = ledgers[i].per_link()[(j, i)]
            assert link["control"]["messages"] == 2  # j's end-of-step marker and its bye
            if j in silent:
                assert tensors is None
                assert link["data"]["messages"] == 0
            else:
                assert link["data"]["payload_bytes"] == sent[j].payload_bytes
                mine = COMPRESSOR.decompress(sent[j].tensors, P)
                theirs = COMPRESSOR.decompress(tensors, P)
                assert mine.numpy().tobytes() == theirs.numpy().tobytes()
        data = ledgers[i].totals("data")["sent"]
        assert data["messages"] == (0 if i in silent else 2)
        assert data["payload_bytes"] == (0 if i in silent else 2 * sent[i].payload_bytes)
        control = ledgers[i].totals("control")["sent"]
        marker, bye = link_headers(i, [(Tag("ctrl", 0, f"{PHASE}/end"), {}),
                                       (Tag("ctrl", 0, "bye"), {})])
        assert control == {"messages": 2 * 2, "payload_bytes": 0,
                           "framing_bytes": 2 * (marker + bye)}  # fmt: skip
        assert ledgers[i].rejected == Counter()


def test_triggered_rounds_keep_every_copy_equal_to_the_senders() -> None:
    """Innovation, trigger, C(s), copy updates over 6 rounds: the common-copy property."""
    rounds, theta0 = 6, 3.0

    def program(comm: Comm) -> tuple[torch.Tensor, dict[int, torch.Tensor], list[bool]]:
        me = comm.node_id
        gen = torch.Generator().manual_seed(100 + me)
        w = torch.zeros(P)
        own_copy = torch.zeros(P)
        copies = {j: torch.zeros(P) for j in comm.neighbors}
        fired = []
        for r in range(rounds):
            comm.round = r
            w += torch.randn(P, generator=gen) * (0.02 * (me + 1))  # node-dependent drift
            s = w - own_copy
            chi = fires(float(s.norm()), threshold("inv_sqrt_t", theta0, r))
            fired.append(chi)
            message = COMPRESSOR.compress(s) if chi else None
            if message is not None:
                own_copy += COMPRESSOR.decompress(message.tensors, P)
            got = comm.exchange_optional(tag(r), None if message is None else message.tensors)
            for j, tensors in got.items():
                if tensors is not None:
                    copies[j] += COMPRESSOR.decompress(tensors, P)
        return own_copy, copies, fired

    ledgers = {i: Ledger(i) for i in RING5}
    results = mesh(inproc_transports, RING5, with_validator(program), ledgers)
    fired = {i: result[2] for i, result in results.items()}
    assert any(all(f) for f in fired.values()) and any(not all(f) for f in fired.values())
    assert len({tuple(f) for f in fired.values()}) > 1  # some fire while others are silent
    for i, (own_copy, _, _) in results.items():
        for j in RING5[i]:
            assert results[j][1][i].numpy().tobytes() == own_copy.numpy().tobytes()
        for r, chi in enumerate(fired[i]):
            by_round = ledgers[i].per_round()[r]
            assert by_round["data"]["sent"]["messages"] == (2 if chi else 0)
            assert by_round["control"]["sent"]["messages"] >= 2  # the two markers


def test_a_malformed_payload_is_dropped_and_seen_as_silence() -> None:
    graph = {0: (1,), 1: (0,)}
    ledgers = {i: Ledger(i) for i in graph}
    good = COMPRESSOR.compress(torch.ones(P))
    bad = dict(good.tensors) | {"k": np.array([P], np.int32)}  # more than Top-k may send

    def program(comm: Comm) -> object:
        if comm.node_id == 1:
            comm.transport.send(0, encode(1, tag(0), bad))  # bypasses the sender-side check
            return comm.exchange_optional(tag(0), None)
        return comm.exchange_optional(tag(0), good.tensors)

    results = mesh(inproc_transports, graph, with_validator(program), ledgers)
    assert results[0] == {1: None}
    assert results[1][0] is not None
    assert ledgers[0].rejected == Counter(schema_mismatch=1)


def test_the_sender_learns_that_peers_would_refuse_its_payload() -> None:
    graph = {0: (1,), 1: (0,)}

    def program(comm: Comm) -> str:
        bad = {"k": np.array([1], np.int32), "values": np.ones(1, np.float32)}
        if comm.node_id == 0:
            with pytest.raises(ValueError, match="schema_mismatch") as info:
                comm.exchange_optional(tag(0), bad)
            comm.exchange_optional(tag(0), None)
            return str(info.value)
        comm.exchange_optional(tag(0), None)
        return ""

    results = mesh(inproc_transports, graph, with_validator(program))
    assert "position coding" in results[0]


def test_a_validator_set_late_still_checks_buffered_messages() -> None:
    graph = {0: (1,), 1: (0,)}
    ledgers = {i: Ledger(i) for i in graph}

    def program(comm: Comm) -> object:
        if comm.node_id == 1:
            comm.send(0, tag(0), {"junk": np.zeros(3, np.float32)})
            comm.barrier()
            return comm.exchange_optional(tag(0), None)
        comm.barrier()  # the junk is buffered now
        comm.set_validator(PHASE, lambda tensors: COMPRESSOR.validate(tensors, P))
        return comm.exchange_optional(tag(0), None)

    results = mesh(inproc_transports, graph, program, ledgers)
    assert results == {0: {1: None}, 1: {0: None}}
    assert ledgers[0].rejected == Counter(schema_mismatch=1)
