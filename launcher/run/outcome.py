"""How a run ended, whichever transport ran it."""

from __future__ import annotations

from dataclasses import dataclass, field


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

    @property
    def status(self) -> str:
        if self.ok:
            return "ok"
        return "interrupted" if self.reason == "interrupted" else "failed"
