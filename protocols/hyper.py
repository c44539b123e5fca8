"""A protocol's `hyper:` block as a checked dataclass.

Every protocol reads its settings the same way: unknown keys are refused (a typo must not run
with a silent default), each value is checked with a one-line message naming the protocol and
the key, and the launcher calls the check before any node starts, so a bad setting is exit 2.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Self

# Keys that live in `hyper` but belong to the runtime, not to a protocol.
RUNTIME_KEYS = frozenset({"torch_threads", "deterministic"})  # dfl_node/learning/torch_settings.py


class HyperConfig:
    """Base for frozen dataclasses of protocol settings; subclasses define `check`."""

    protocol_name: ClassVar[str] = "protocol"

    @classmethod
    def from_hyper(cls, hyper: Mapping[str, Any]) -> Self:
        known = set(cls.__dataclass_fields__)  # type: ignore[attr-defined]
        unknown = sorted(set(hyper) - known - RUNTIME_KEYS)
        if unknown:
            raise ValueError(f"{cls.protocol_name}: unknown hyper-parameters {unknown} "
                             f"(known: {sorted(known)})")
        cfg = cls(**cls.normalise({k: v for k, v in hyper.items() if k in known}))
        cfg.check()
        return cfg

    @classmethod
    def normalise(cls, given: dict[str, Any]) -> dict[str, Any]:
        """Hook for spellings a config may use (e.g. `auto`) before the dataclass is built."""
        return given

    def check(self) -> None:
        """Raise ValueError (one line) on a bad value."""

    def fail(self, name: str, what: str) -> None:
        raise ValueError(f"{self.protocol_name}: {name} must be {what}, "
                         f"got {getattr(self, name)!r}")

    def number(self, name: str, low: float, strict: bool) -> None:
        v = getattr(self, name)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
                or v < low or (strict and v == low):
            self.fail(name, f"a number {'>' if strict else '>='} {low}")

    def choice(self, name: str, options: tuple[str, ...]) -> None:
        if getattr(self, name) not in options:
            self.fail(name, f"one of {list(options)}")

    def count(self, name: str) -> None:
        v = getattr(self, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            self.fail(name, "a positive integer")

    def flag(self, name: str) -> None:
        if not isinstance(getattr(self, name), bool):
            self.fail(name, "true or false")

    def mapping(self, name: str) -> None:
        if not isinstance(getattr(self, name), Mapping):
            self.fail(name, "a mapping")
