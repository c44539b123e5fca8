"""DMFL-SQ's bit accounting, eqs. (18)-(20) of the paper, as pure functions.

The paper counts communication with a closed formula, not with what a socket carries:

    B_model,t = sum_i deg_i [ b_trig + chi_i^t ( k_i^t b_q + min(k_i^t ceil(log2 P), P)
                                                 + b_scale + b_hdr ) ]                  (18)
    B_Psi,t   = 2 K_Psi |E| ( b_loss + ceil(log2 n) )                                   (19)
    B_tot     = sum_t ( B_model,t + B_Psi,t ),   Bbar_client = B_tot / n                (20)

The protocol charges each term on the directed link (sender -> receiver) and round where it
arises, so a run's ledger sums to exactly these totals: per link and round the model message
costs `model_link_bits(...)` (its components values / positions / scale / header / trigger), and
the consensus costs `psi_link_bits(K_Psi, n)` = K_Psi (b_loss + ceil(log2 n)); summed over the
2|E| directed links this is eq. (19). With n = 20 (ceil(log2 20) = 5, b_loss = 32) the network
charge is 74 K_Psi |E| per round: 740, 703 and 888 bits per client per round on the paper's
ring (|E| = 20, K_Psi = 10), ER(0.5) (95, 2) and RGG(0.4) (60, 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from protocols.toolkit.positions import ceil_log2

# The paper's constants (Sec. VI): b_q = 8, b_scale = 32, b_loss = 32, b_hdr = 32, b_trig = 0.
PAPER_ACCOUNTING = {"b_q": 8, "b_scale": 32, "b_loss": 32, "b_hdr": 32, "b_trig": 0}
MODEL_COMPONENTS = ("values", "positions", "scale", "header", "trigger")


@dataclass(frozen=True)
class Accounting:
    """The formula's constants (bits). `b_q` / `b_scale` default to the compressor's own
    (8 / 32 for Q8, 32 / 0 without a quantiser: the "no quantisation" ablation of
    docs/protocols/dmfl-sq.md#a15);
    `dense_skip_mask` drops the position term when every coordinate is sent (k = P), which the
    literal formula still charges as a P-bit mask (docs/protocols/dmfl-sq.md#a15)."""

    b_q: int = 8
    b_scale: int = 32
    b_loss: int = 32
    b_hdr: int = 32
    b_trig: int = 0
    dense_skip_mask: bool = False

    @classmethod
    def from_mapping(cls, given: Mapping[str, Any] | None, *, b_q: int = 8,
                     b_scale: int = 32) -> Accounting:
        """`hyper.accounting` over the defaults; `b_q` / `b_scale` are the compressor's."""
        given = dict(given or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ValueError(f"accounting: unknown keys {unknown} (known: {sorted(known)})")
        values: dict[str, Any] = {"b_q": b_q, "b_scale": b_scale}
        values.update(given)
        for name in known - {"dense_skip_mask"}:
            v = values.get(name, getattr(cls, name))
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"accounting.{name}: must be a non-negative integer, got {v!r}")
        if not isinstance(values.get("dense_skip_mask", False), bool):
            raise ValueError("accounting.dense_skip_mask: must be true or false")
        return cls(**values)


def position_bits(k: int, size: int, acc: Accounting) -> int:
    """min(k ceil(log2 P), P): an index list or a P-bit mask, whichever is cheaper."""
    if k <= 0:
        return 0
    if acc.dense_skip_mask and k >= size:
        return 0
    return min(k * ceil_log2(size), size)


def model_link_bits(triggered: bool, k: int, size: int, acc: Accounting, *,
                    sparse: bool = True, quantized: bool = True) -> dict[str, int]:
    """Eq. (18)'s bracket: what one directed link carries for one sender in one round.

    `k` is k_i^t, the number of coordinates the message holds (0 when silent). The trigger term
    is charged every round, fired or not; the rest only when the trigger fired. A dense message
    (`sparse=False`: the identity compressor, all P values in order) has no positions to charge;
    an unquantised one (`quantized=False`) has no scale. With the paper's C = Q8 o Top_k both
    are true and this is eq. (18) literally, also for k = 0 (scale and header still charged).
    """
    bits = dict.fromkeys(MODEL_COMPONENTS, 0)
    bits["trigger"] = acc.b_trig
    if triggered:
        bits["values"] = k * acc.b_q
        bits["positions"] = position_bits(k, size, acc) if sparse else 0
        bits["scale"] = acc.b_scale if quantized else 0
        bits["header"] = acc.b_hdr
    return bits


def psi_link_bits(k_psi: int, n: int, acc: Accounting) -> int:
    """One directed link's consensus bits per round: K_Psi pairs (loss, ceil(log2 n)-bit id)."""
    return k_psi * (acc.b_loss + ceil_log2(n))


def psi_network_bits(k_psi: int, edges: int, n: int, acc: Accounting) -> int:
    """Eq. (19): 2 K_Psi |E| (b_loss + ceil(log2 n)) per round, whole network."""
    return 2 * edges * psi_link_bits(k_psi, n, acc)


def model_network_bits(degrees: Mapping[int, int], triggered: Mapping[int, bool],
                       ks: Mapping[int, int], size: int, acc: Accounting) -> int:
    """Eq. (18) for one round, whole network, for C = Q_b o Top_k (a reference for tests)."""
    return sum(deg * sum(model_link_bits(triggered[i], ks[i], size, acc).values())
               for i, deg in degrees.items())

