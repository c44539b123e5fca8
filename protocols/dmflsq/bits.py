"""DMFL-SQ's bit accounting, eqs. (18)-(20) of the paper, as pure functions.

The paper counts communication with a closed formula, not with what a socket carries:

    B_model,t = sum_i deg_i [ b_trig + chi_i^t ( k_i^t b_q + min(k_i^t ceil(log2 P), P)
                                                 + b_scale + b_hdr ) ]                  (18)
    B_Psi,t   = 2 K_Psi |E| ( b_loss + ceil(log2 n) )                                   (19)
    B_tot     = sum_t ( B_model,t + B_Psi,t ),   Bbar_client = B_tot / n                (20)

The protocol charges each term on the directed link (sender -> receiver) and round where it
arises, where it is sent, so a run's ledger sums to exactly these totals: per link and round the
model message states its bracket of eq. (18) itself (`Compressed.payload`, components values /
positions / scale / header / trigger; a silent sender the trigger term alone), and every
consensus sub-round charges one pair, b_loss + ceil(log2 n) (`psi_pair_bits`), K_Psi of them
per link and round; summed over the 2|E| directed links this is eq. (19). The functions here
are the paper's equations, which the tests hold the ledgers to. With n = 20 (ceil(log2 20) = 5,
b_loss = 32) the network charge is 74 K_Psi |E| per round: 740, 703 and 888 bits per client per
round on the paper's ring (|E| = 20, K_Psi = 10), ER(0.5) (95, 2) and RGG(0.4) (60, 4).
"""

from __future__ import annotations

from collections.abc import Mapping

from dfl_config.section import NonNegativeInt
from protocols.toolkit.accounting import MessageAccounting, message_bits
from protocols.toolkit.index_bits import ceil_log2

# The paper's constants (Sec. VI): b_q = 8, b_scale = 32, b_loss = 32, b_hdr = 32, b_trig = 0.
PAPER_ACCOUNTING = {"b_q": 8, "b_scale": 32, "b_loss": 32, "b_hdr": 32, "b_trig": 0}
MODEL_COMPONENTS = ("values", "positions", "scale", "header", "trigger")


class Accounting(MessageAccounting):
    """`hyper.accounting`: the model message's constants (b_q / b_scale default to the
    compressor's own: 8 / 32 for Q8; 32 and no scale without a quantiser, the "no
    quantisation" ablation of docs/protocols/dmfl-sq.md#a15) and the consensus pair's."""

    b_loss: NonNegativeInt = 32
    """Bits of the loss in a consensus pair (eq. 19)."""


def model_link_bits(triggered: bool, k: int, size: int, acc: MessageAccounting, *,
                    sparse: bool = True, quantized: bool = True) -> dict[str, int]:
    """Eq. (18)'s bracket: what one directed link carries for one sender in one round (the
    paper's reference, for tests; a run charges what its messages state, `Compressed.payload`).

    `k` is k_i^t, the number of coordinates the message holds (0 when silent). The trigger term
    is charged every round, fired or not; the rest only when the trigger fired. A dense message
    (`sparse=False`: the identity compressor, all P values in order) has no positions to charge;
    an unquantised one (`quantized=False`) has no scale. With the paper's C = Q8 o Top_k both
    are true and this is eq. (18) literally, also for k = 0 (scale and header still charged).
    `acc.b_q` must be set (the compressor's own is not known here).
    """
    if acc.b_q is None:
        raise ValueError("model_link_bits needs the accounting's b_q")
    if not triggered:
        return {**dict.fromkeys(MODEL_COMPONENTS, 0), "trigger": acc.b_trig}
    return message_bits(acc, k, size, value_bits=acc.b_q, sparse=sparse, quantized=quantized)


def psi_pair_bits(n: int, acc: Accounting) -> int:
    """One consensus pair on one link: the loss and a ceil(log2 n)-bit id."""
    return acc.b_loss + ceil_log2(n)


def psi_link_bits(k_psi: int, n: int, acc: Accounting) -> int:
    """One directed link's consensus bits per round: K_Psi pairs (loss, ceil(log2 n)-bit id)."""
    return k_psi * psi_pair_bits(n, acc)


def psi_network_bits(k_psi: int, edges: int, n: int, acc: Accounting) -> int:
    """Eq. (19): 2 K_Psi |E| (b_loss + ceil(log2 n)) per round, whole network."""
    return 2 * edges * psi_link_bits(k_psi, n, acc)


def model_network_bits(degrees: Mapping[int, int], triggered: Mapping[int, bool],
                       ks: Mapping[int, int], size: int, acc: MessageAccounting) -> int:
    """Eq. (18) for one round, whole network, for C = Q_b o Top_k (a reference for tests)."""
    return sum(deg * sum(model_link_bits(triggered[i], ks[i], size, acc).values())
               for i, deg in degrees.items())
