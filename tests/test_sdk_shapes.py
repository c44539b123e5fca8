"""The SDK's communication shapes on real Comms (inproc transport), with a real formula ledger
and virtual clock: each shape charges the links it sent on and advances the clock once per
step, and a payload without bits is refused before anything is sent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch

from dfl_node.comm.channel import Comm
from dfl_node.ledgers.formula import FormulaLedger
from dfl_node.netsim.virtual_clock import LinkModel, VirtualClock
from protocols.sdk import Exchange, Payload, Star, dense
from tests.test_comm import inproc_transports, run_mesh


@dataclass
class Runtime:
    """What the shapes use of a node's context: its Comm, formula ledger and clock."""

    comm: Comm
    formula: FormulaLedger
    clock: VirtualClock


LINE3 = {0: (1,), 1: (0, 2), 2: (1,)}
TOPOLOGY = {"nodes": [{"id": i} for i in LINE3], "edges": [[0, 1], [1, 2]]}


def on_line3(program: Any) -> dict[int, Any]:
    """`program(runtime)` on every node of the line 0 - 1 - 2; its results and each node's
    formula ledger rows and clock."""
    model = LinkModel.from_plan(TOPOLOGY, {})

    def node(comm: Comm) -> tuple[Any, list[list[Any]], VirtualClock]:
        comm.round = 0
        runtime = Runtime(comm, FormulaLedger(comm.node_id), VirtualClock(model))
        return program(runtime), runtime.formula.state(), runtime.clock

    return run_mesh(inproc_transports(LINE3), LINE3, node)


def test_a_payload_without_bits_is_refused_by_every_shape_before_anything_is_sent() -> None:
    silent = Payload({"x": torch.ones(2)}, {"values": 0})

    def program(rt: Runtime) -> list[str]:
        ex = Exchange(rt, "p")
        peers = rt.comm.neighbors
        sends = [lambda: ex(0, silent), lambda: ex.optional(0, silent),
                 lambda: ex.each(0, dict.fromkeys(peers, silent)),
                 lambda: ex.post(0, silent, to=peers), lambda: ex.send(0, silent),
                 lambda: ex(0, Payload({}, {"values": 8}))]
        errors = []
        for send in sends:
            with pytest.raises(ValueError, match="formula bits") as info:
                send()
            errors.append(str(info.value))
        with pytest.raises(ValueError, match="nothing declares"):
            ex.gather(0)
        return errors

    for errors, formula, clock in on_line3(program).values():
        assert len(errors) == 6 and formula == [] and clock.frames == 0
        assert all("phase 'p'" in e for e in errors)


def test_the_shapes_charge_the_links_sent_on_and_tick_once_per_step() -> None:
    """On the line 0 - 1 - 2: an exchange with every neighbour, one between 1 and 2 alone
    (`post` to a subset), and a round of the star whose aggregator is 1; each message's bits
    are charged on the links it went on, and each of the four is one clock step."""

    def program(rt: Runtime) -> dict[str, Any]:
        me = rt.comm.node_id
        mine = {"x": torch.full((3,), float(me))}
        ex = Exchange(rt, "all")
        theirs = ex(0, dense(mine))
        sub = Exchange(rt, "sub")
        to = [2] if me == 1 else [1] if me == 2 else []
        got = sub.post(0, dense(mine), to=to).gather()
        star = Star(rt, 1, up=("up", {"x": ("float32", (3,))}),
                    down=("down", {"x": ("float32", (3,))}))
        if me == 1:
            uploads = star.collect(0)
            star.answer(0, Payload({"x": uploads[0]["x"] + uploads[2]["x"]}, {"sum": 5}))
            answer = mine["x"] * 2
        else:
            star.upload(0, Payload(mine, {"up": 7}))
            answer = star.download(0)["x"]
        return {"all": sorted(theirs), "sub": sorted(got), "answer": answer.tolist()}

    results = on_line3(program)
    dense_bits = 3 * 32
    for me, (seen, _, clock) in results.items():
        assert seen["all"] == list(LINE3[me])
        assert seen["sub"] == {0: [], 1: [2], 2: [1]}[me]
        assert seen["answer"] == [2.0] * 3  # 0 + 2, from the aggregator 1
        assert clock.frames == 4  # all, sub, up, down
        assert clock.seconds > 0
    assert results[0][1] == [[0, 1, "up", 7], [0, 1, "values", dense_bits]]
    assert results[1][1] == [[0, 0, "sum", 5], [0, 0, "values", dense_bits],
                             [0, 2, "sum", 5], [0, 2, "values", 2 * dense_bits]]
    assert results[2][1] == [[0, 1, "up", 7], [0, 1, "values", 2 * dense_bits]]
