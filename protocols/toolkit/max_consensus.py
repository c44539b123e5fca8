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

Each sub-round is one call of `step(k, payload)`: a neighbour exchange on the SDK's
`Exchange` (tag kind "cons", ledger traffic "data": it is the algorithm's traffic; step k) of
{"value": float32[1], "id": int64[1]}, whose payload states `pair_bits`, as the paper counts
one pair, so that the exchange charges them on every link a pair is sent on and the clock
advances once per sub-round. K = diam(G) is the protocol's to compute from the plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import torch

from protocols.sdk.payload import Payload
from protocols.toolkit.options import TIE_BREAKS

CONSENSUS_KIND = "cons"

Pair = tuple[float, int]
# One synchronous sub-round: send the payload to every neighbour, theirs back by neighbour id.
Step = Callable[[int, Payload], Mapping[int, Mapping[str, torch.Tensor]]]


def max_consensus(
    step: Step,
    me: int,
    value: float | np.float32,
    rounds: int,
    *,
    pair_bits: Mapping[str, int],
    tie_break: str = "larger_id",
) -> Pair:
    """Run `rounds` sub-rounds of max-consensus on (value, me); return the final pair.

    Every node of the graph calls it with the same `rounds` and `tie_break`, each sub-round k
    through `step(k, payload)`. rounds = 0 returns the own pair.
    """
    _check_tie_break(tie_break)
    if type(rounds) is not int or rounds < 0:
        raise ValueError(f"max_consensus: rounds must be an int >= 0, got {rounds!r}")
    best = (float(np.float32(value)), me)
    for k in range(rounds):
        tensors = {"value": torch.tensor([best[0]], dtype=torch.float32),
                   "id": torch.tensor([best[1]], dtype=torch.int64)}
        received = step(k, Payload(tensors, pair_bits))
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
