"""The formula ledger: bits as a paper counts them, beside the wire ledger's real bytes.

Papers charge communication with a closed formula (DMFL-SQ eqs. 18-20: values, positions,
scale, header, trigger and consensus terms). A protocol charges each term on the directed link
and round where the paper puts it; the launcher sums them into `bits_per_client` and per-round
series, so a run reports both what the paper would claim and what ZeroMQ actually carried.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any


class FormulaLedger:
    """Bits this node sent, per (round, destination, component)."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self._bits: defaultdict[tuple[int, int, str], int] = defaultdict(int)

    def charge(self, round_: int, dst: int, component: str, bits: int) -> None:
        if bits < 0:
            raise ValueError(f"cannot charge {bits} bits")
        self._bits[(round_, dst, component)] += int(bits)

    def charge_all(self, round_: int, dst: int, bits: Mapping[str, int]) -> int:
        """Charge every non-zero component of one message; return the message's bits."""
        for component, value in bits.items():
            if value:
                self.charge(round_, dst, component, value)
        return sum(bits.values())

    def state(self) -> list[list[Any]]:
        """[round, dst, component, bits] rows, for a checkpoint."""
        return [[r, d, c, b] for (r, d, c), b in sorted(self._bits.items())]

    def load_state(self, rows: list[list[Any]]) -> None:
        self._bits.clear()
        for r, d, c, b in rows:
            self._bits[(int(r), int(d), str(c))] = int(b)

    def total(self) -> int:
        return sum(self._bits.values())

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node_id,
                "cells": [{"round": r, "src": self.node_id, "dst": d, "component": c, "bits": b}
                          for (r, d, c), b in sorted(self._bits.items())]}
