"""The traffic ledger of one node: what crossed each link in each round, and what was refused.

Every message the node sends or accepts is counted once, on its link (src, dst) and its round,
with its payload (tensor bytes) and framing (header bytes) apart, and training traffic ("data")
apart from control traffic (barriers, hello/bye). Dropped messages are counted by reason in
`rejected`. Framing counts the header's bytes only (a compact header that shares its frame with
tiny tensors is counted without them: their bytes are payload); ZMTP's few bytes per frame and
TCP/IP headers are the transport's and are not included, so both transports report the same
numbers.

Heartbeats (dfl_node/transports/liveness.py) are control traffic of their own: they run on a
clock, not on rounds, so they are kept per neighbour in `heartbeats`, never in the per-round
cells.

A run's totals are the sum over nodes of what each node *sent*: every message is then counted
exactly once.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from dfl_node.wire.tags import Tag

TRAFFIC_KINDS = ("data", "control")


@dataclass
class Traffic:
    """Counters of one cell of the ledger (or a sum of cells)."""

    messages: int = 0
    payload_bytes: int = 0
    framing_bytes: int = 0

    def add(self, other: Traffic) -> None:
        self.messages += other.messages
        self.payload_bytes += other.payload_bytes
        self.framing_bytes += other.framing_bytes

    @property
    def wire_bytes(self) -> int:
        return self.payload_bytes + self.framing_bytes

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class _Cell(NamedTuple):
    """A cell's key (a tuple: built for every message, so it costs a tuple's construction)."""

    src: int
    dst: int
    round: int
    traffic: str


def traffic_kind(tag: Tag) -> str:
    """The ledger's traffic kind of a tag: "control" or "data"."""
    return "control" if tag.is_control else "data"


class Ledger:
    """Per-link, per-round counters of one node; used by the thread that owns its `Comm`."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.rejected: Counter[str] = Counter()
        self._cells: defaultdict[_Cell, Traffic] = defaultdict(Traffic)
        self.heartbeats: dict[int, dict[str, int]] = {}  # neighbour -> messages, bytes sent
        # phases not counted: a resumed node's second start-up (its first is in the checkpoint)
        self.quiet_phases: frozenset[str] = frozenset()

    def record_send(self, dst: int, tag: Tag, payload_bytes: int, framing_bytes: int) -> None:
        if tag.phase in self.quiet_phases:
            return
        self._record(
            _Cell(self.node_id, dst, tag.round, traffic_kind(tag)), payload_bytes, framing_bytes
        )

    def record_recv(self, src: int, tag: Tag, payload_bytes: int, framing_bytes: int) -> None:
        if tag.phase in self.quiet_phases:
            return
        self._record(
            _Cell(src, self.node_id, tag.round, traffic_kind(tag)), payload_bytes, framing_bytes
        )

    def record_heartbeats(self, per_peer: dict[int, dict[str, int]]) -> None:
        """The heartbeats this node sent to each neighbour over the run."""
        self.heartbeats = {peer: dict(counts) for peer, counts in sorted(per_peer.items())}

    def record_rejected(self, reason: str, count: int = 1) -> None:
        self.rejected[reason] += count

    def totals(self, kind: str = "data") -> dict[str, dict[str, int]]:
        """{"sent": counters, "received": counters} for one traffic kind, over all rounds."""
        if kind not in TRAFFIC_KINDS:
            raise ValueError(f"traffic kind must be one of {TRAFFIC_KINDS}, got {kind!r}")
        sums = _directions()
        for cell, traffic in self._cells.items():
            if cell.traffic == kind:
                sums[self._direction(cell)].add(traffic)
        return _plain(sums)

    def per_round(self) -> dict[int, dict[str, dict[str, dict[str, int]]]]:
        """round -> kind -> {"sent", "received"} -> counters, rounds ascending."""
        rounds: dict[int, dict[str, dict[str, Traffic]]] = {}
        for cell, traffic in self._cells.items():
            row = rounds.setdefault(cell.round, {kind: _directions() for kind in TRAFFIC_KINDS})
            row[cell.traffic][self._direction(cell)].add(traffic)
        return {r: {kind: _plain(sums) for kind, sums in rounds[r].items()} for r in sorted(rounds)}

    def per_link(self) -> dict[tuple[int, int], dict[str, dict[str, int]]]:
        """(src, dst) -> kind -> counters over all rounds, links ascending."""
        links: dict[tuple[int, int], dict[str, Traffic]] = {}
        for cell, traffic in self._cells.items():
            row = links.setdefault(
                (cell.src, cell.dst), {kind: Traffic() for kind in TRAFFIC_KINDS}
            )
            row[cell.traffic].add(traffic)
        return {link: _plain(links[link]) for link in sorted(links)}

    def wire_bytes(self, through_round: int | None = None) -> int:
        """Data payload plus framing bytes this node sent, cumulative up to `through_round`."""
        return sum(
            traffic.wire_bytes
            for cell, traffic in self._cells.items()
            if cell.traffic == "data"
            and self._direction(cell) == "sent"
            and (through_round is None or cell.round <= through_round)
        )

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data: totals, one row per (link, round, kind), and rejections."""
        cells = sorted(self._cells.items())
        return {
            "node": self.node_id,
            "totals": {kind: self.totals(kind) for kind in TRAFFIC_KINDS},
            "cells": [cell._asdict() | traffic.as_dict() for cell, traffic in cells],
            "rejected": dict(sorted(self.rejected.items())),
            "heartbeats": {str(peer): counts for peer, counts in self.heartbeats.items()},
        }

    def state(self, before_round: int) -> dict[str, Any]:
        """The cells of rounds before `before_round` and the rejections, for a checkpoint taken
        after that many rounds (messages of later rounds that already arrived come again)."""
        cells = [cell._asdict() | traffic.as_dict() for cell, traffic in sorted(self._cells.items())
                 if cell.round < before_round]
        return {"cells": cells, "rejected": dict(self.rejected)}

    def load_state(self, state: dict[str, Any]) -> None:
        """Replace the counters by a checkpoint's."""
        self._cells.clear()
        for row in state["cells"]:
            cell = _Cell(int(row["src"]), int(row["dst"]), int(row["round"]), str(row["traffic"]))
            self._cells[cell] = Traffic(int(row["messages"]), int(row["payload_bytes"]),
                                        int(row["framing_bytes"]))
        self.rejected = Counter({str(k): int(v) for k, v in state["rejected"].items()})

    def _record(self, cell: _Cell, payload_bytes: int, framing_bytes: int) -> None:
        traffic = self._cells[cell]
        traffic.messages += 1
        traffic.payload_bytes += payload_bytes
        traffic.framing_bytes += framing_bytes

    def _direction(self, cell: _Cell) -> str:
        return "sent" if cell.src == self.node_id else "received"


def _directions() -> dict[str, Traffic]:
    return {"sent": Traffic(), "received": Traffic()}


def _plain(counters: dict[str, Traffic]) -> dict[str, dict[str, int]]:
    return {key: traffic.as_dict() for key, traffic in counters.items()}
