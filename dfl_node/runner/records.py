"""The node's records to the launcher: `ready` when it starts, `metrics` after each
evaluation, `done` when its rounds are over; read by the collector, the live progress, the
summary, the link report and failure handling.

One model per record for the writer (dfl_node/runner/run_node.py) and every reader, so a key a
record lacks has one default, declared here. A record arrives from another process, so the
collector validates it here and refuses one that does not fit ("bad_record"). Nested reports
(the ledgers, the protocol's keys) stay plain mappings: their owners read them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from dfl_config.section import NonNegativeInt


class ReadyRecord(BaseModel):
    """A node built its workload and is about to meet the mesh."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["ready"] = "ready"
    node: int
    pid: int | None = None


class MetricsRecord(BaseModel):
    """One evaluation of a node's models, a row of metrics.jsonl. The protocol's keys
    (`evaluate()` and its round's info, e.g. `formula_bits`) ride along as extra keys; the node
    sends the record in its own key order, which metrics.jsonl keeps."""

    model_config = ConfigDict(frozen=True, extra="allow")

    type: Literal["metrics"] = "metrics"
    round: NonNegativeInt
    node: int
    accuracy: float | None = None
    loss: float | None = None
    wire_bytes: int = 0
    """Bytes this node has put on the wire so far."""
    virtual_seconds: float | int = 0.0
    eval_split: str | None = None
    slot_mismatches: int = 0
    retransmissions: int | float = 0

    def extra(self, key: str) -> Any:
        """A protocol's key of the record (None if it sent none)."""
        return (self.model_extra or {}).get(key)


class Membership(BaseModel):
    """The survivors' agreement after a node died (dfl_node/runner/membership.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dead: list[int] = []
    """The nodes the survivors run without."""
    changes: list[Any] = []
    """From which round the survivors ran on which graph."""


class DoneRecord(BaseModel):
    """Fields in the order the node writes them; `model_dump(exclude_unset=True)` is the
    record as sent (a key the node leaves out, such as `global_accuracy`, stays out)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["done"] = "done"
    node: int
    pid: int | None = None
    """The node's process id; None: the launcher's record of the process it started."""
    host: str | None = None
    """The node's host name; None: the plan's host of the node."""
    device: str | None = None
    accuracy: float | None = None
    """The last evaluation's accuracy; None when the node never evaluated."""
    loss: float | None = None
    global_accuracy: float | None = None
    """Of the global test split, when the run evaluates on one."""
    global_loss: float | None = None
    virtual_seconds: float | int = 0.0
    ledger: dict[str, Any]
    """The traffic ledger (dfl_node/ledgers/traffic.py to_json): required, it is the record."""
    formula: dict[str, Any] = {}
    """The formula ledger (dfl_node/ledgers/formula.py to_json)."""
    protocol: dict[str, Any] = {}
    """The protocol's summary keys, averaged over nodes."""
    rejected: dict[str, int] = {}
    """Messages this node refused, by reason."""
    slot_mismatches: int = 0
    links: dict[str, Any] = {}
    """The virtual clock's per-link report, "a->b" -> totals."""
    prephase: dict[str, int] = {}
    """The pre-phase's traffic counters; empty without one."""
    report: dict[str, Any] = {}
    """The protocol's own node report (Reporting.node_report)."""
    round_seconds: dict[str, Any] = {}
    round_cpu_seconds: dict[str, Any] = {}
    first_round_at: float | None = None
    """Unix time the node finished its first round."""
    first_round_began_at: float | None = None
    membership: Membership | None = None
    """Only after a death the survivors agreed on."""

    @property
    def dead(self) -> list[int]:
        return [] if self.membership is None else self.membership.dead
