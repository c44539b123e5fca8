"""How a run ended, whichever transport ran it, and what ended it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cause:
    """What ended a run that did not finish: `kind` for scripts (`node_failed`, `disk_full`,
    `read_only`, `permission_denied`, `io_error`, `signal`, `zygote_died`), `message` for
    people (the line stderr gets), `detail` the facts behind it (the errno and file, the
    signal, the process). summary.json keeps it as `cause`."""

    kind: str
    message: str
    detail: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, **self.detail}


@dataclass
class Outcome:
    ok: bool
    failed_node: int | None = None
    reason: str = ""
    pids: dict[int, int] = field(default_factory=dict)
    # --on-failure continue: nodes that died while the others went on, and why
    deaths: dict[int, str] = field(default_factory=dict)
    # when the launcher concluded that the run failed (Unix time; 0 if it did not)
    failed_at: float = 0.0
    # heartbeat intervals the failed node had been silent when a neighbour found it dead
    # (None when the launcher saw it die, or no neighbour said)
    silent_intervals: int | None = None
    # what ended the run when no node is to blame (a signal, the disk, the zygote)
    cause: Cause | None = None

    @property
    def status(self) -> str:
        if self.ok:
            return "ok"
        return "interrupted" if self.reason == "interrupted" else "failed"

    def cause_record(self) -> dict[str, Any] | None:
        """summary.json's `cause`: None for a run that finished; a failed node when no other
        cause was found."""
        if self.ok:
            return None
        if self.cause is not None:
            return self.cause.record()
        return Cause("node_failed", self.reason or "no reason given",
                     {"node": self.failed_node}).record()
