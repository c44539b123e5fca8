"""Scalar max-consensus: K synchronous sub-rounds of lexicographic max over (value, id) pairs.

DMFL-SQ selects the worst client i_t* = argmax_i f_hat_i^t by max-consensus over the pairs
(f_hat_i^t, i) "using a fixed lexicographic tie-breaking rule" (paper, Sec. III, "Fairness-consensus
implementation"). In sub-round k every node sends its CURRENT running maximum (not its own
pair) to every neighbour and keeps the lexicographic max of its own and the received pairs, so
after K >= diam(G) sub-rounds every node holds the global maximum; with fewer, nodes farther than
K hops from the maximiser may end with a local maximum, possibly their own pair (self-selection).
There is no early stop: the accounting, 2 K |E| (b_loss + ceil(log2 n)) bits (eq. 19), assumes
exactly K sub-rounds.

Values are compared as float32, exactly as transmitted (b_loss = 32), so every node compares
identical numbers. Order: value first, then id by the tie rule ("larger_id": on an exact float32
tie the larger id wins, the literal lexicographic max; "smaller_id": the smaller id wins). +0.0
and -0.0 tie. NaN ranks above every number (a diverged client is the worst one), so the order is
total and the result cannot depend on arrival order. The selected pair travels whole, so every
node that agrees on the id also reports the same value bits.

Messages use the tag kind "cons" (ledger traffic "data": it is the algorithm's traffic), phase
`phase`, step k, with tensors {"value": float32[1], "id": int64[1]}; the phase gets that exact
schema. K = diam(G) is the protocol's to compute from the plan. Given a formula ledger, every
sub-round charges each link the bits of the pair it carried (`pair_bits`, as the paper counts
one pair), so the charge is made where the pairs are sent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from dfl_node.comm.channel import Comm
from dfl_node.ledgers.formula import FormulaLedger
from dfl_node.wire.tags import Tag
from protocols.toolkit.options import TIE_BREAKS

CONSENSUS_KIND = "cons"
SCHEMA = {"value": ("float32", (1,)), "id": ("int64", (1,))}

Pair = tuple[float, int]


def max_consensus(
    comm: Comm,
    round_: int,
    value: float | np.float32,
    rounds: int,
    *,
    tie_break: str = "larger_id",
    phase: str = "psi",
    formula: FormulaLedger | None = None,
    pair_bits: Mapping[str, int] | None = None,
) -> Pair:
    """Run `rounds` sub-rounds of max-consensus on (value, comm.node_id); return the final pair.

    `comm.round` must be `round_` (within the window). Every node of the graph calls it with
    the same `round_`, `rounds`, `tie_break` and `phase`. rounds = 0 returns the own pair.
    With `formula`, each sub-round charges `pair_bits` on every link a pair was sent on.
    """
    _check_tie_break(tie_break)
    if type(rounds) is not int or rounds < 0:
        raise ValueError(f"max_consensus: rounds must be an int >= 0, got {rounds!r}")
    comm.set_schema(phase, SCHEMA)
    best = (float(np.float32(value)), comm.node_id)
    for k in range(rounds):
        tensors: dict[str, np.ndarray] = {"value": np.array([best[0]], np.float32),
                                          "id": np.array([best[1]], np.int64)}
        received = comm.exchange(Tag(CONSENSUS_KIND, round_, phase, step=k), tensors)
        if formula is not None and pair_bits:
            for dst in comm.neighbors:
                formula.charge_all(round_, dst, pair_bits)
        pairs = [best] + [(float(t["value"][0]), int(t["id"][0])) for t in received.values()]
        best = max(pairs, key=lambda pair: _rank(pair, tie_break))
    return best


def central_argmax(values: Mapping[int, float], tie_break: str = "larger_id") -> int:
    """The id that max-consensus with K >= diam(G) selects, computed centrally (for tests)."""
    _check_tie_break(tie_break)
    pairs = [(float(np.float32(v)), i) for i, v in values.items()]
    return max(pairs, key=lambda pair: _rank(pair, tie_break))[1]


def _rank(pair: Pair, tie_break: str) -> tuple[bool, float, int]:
    """A total order key: NaN above all numbers, then the value, then the id by the tie rule."""
    value, node = pair
    nan = math.isnan(value)
    return (nan, 0.0 if nan else value, node if tie_break == "larger_id" else -node)


def _check_tie_break(tie_break: str) -> None:
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
