"""How a run ended, whichever transport ran it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Outcome:
    ok: bool
    failed_node: int | None = None
    reason: str = ""
    pids: dict[int, int] = field(default_factory=dict)

    @property
    def status(self) -> str:
        if self.ok:
            return "ok"
        return "interrupted" if self.reason == "interrupted" else "failed"
