"""CLI protocol names -> classes: a fixed table, never an import chosen by data."""

from __future__ import annotations

from protocols.base import Protocol
from protocols.dmflsq import DMFLSQ
from protocols.dpsgd import DPSGD

PROTOCOLS: dict[str, type[Protocol]] = {
    "d-psgd": DPSGD,
    "dmfl-sq": DMFLSQ,
}


def protocol_class(name: str) -> type[Protocol]:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise KeyError(f"unknown protocol {name!r} (known: {', '.join(sorted(PROTOCOLS))})") \
            from None
