"""Message tags: the address of a message within a run's communication schedule.

Every message carries (kind, round, phase, step, slot) and `Comm` buffers early arrivals by
(source, tag). A receiver asks for exactly the tag its schedule expects, so the order in which
messages arrive can never change which data a protocol computes with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# "data": training traffic; "cons": scalar max-consensus sub-rounds (part of the algorithm's
# traffic, so the ledger counts them as data, but on their own kind so that they can never be
# confused with a tensor exchange of the same round and phase); "ctrl": barriers, hello/bye,
# end-of-step markers and other control traffic, which the ledger counts apart so that training
# costs are not inflated by runtime bookkeeping.
KINDS = ("data", "cons", "ctrl")
CONTROL_KIND = "ctrl"


@dataclass(frozen=True, order=True)
class Tag:
    """Where a message belongs in the schedule; identical on sender and receiver."""

    kind: str
    round: int
    phase: str = ""
    step: int = 0
    slot: int = 0
    # set by __post_init__; no part of equality, order or repr
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Checked at construction so a malformed tag fails in the sender, not as a silent
        # rejection at every receiver.
        if self.kind not in KINDS:
            raise ValueError(f"tag kind must be one of {KINDS}, got {self.kind!r}")
        if not isinstance(self.phase, str):
            raise TypeError(f"tag phase must be a str, got {type(self.phase).__name__}")
        round_, step, slot = self.round, self.step, self.slot
        if not (type(round_) is int and type(step) is int and type(slot) is int
                and round_ >= 0 and step >= 0 and slot >= 0):
            for name, value in (("round", round_), ("step", step), ("slot", slot)):
                if type(value) is not int or value < 0:
                    raise ValueError(f"tag {name} must be a non-negative int, got {value!r}")
        # A tag keys Comm's inbox and its record of consumed messages, so a round hashes its
        # tags a score of times: hashed once here.
        object.__setattr__(self, "_hash", hash((self.kind, round_, self.phase, step, slot)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[Tag], tuple[str, int, str, int, int]]:
        # a str's hash differs between interpreters: a copy elsewhere hashes afresh
        return Tag, (self.kind, self.round, self.phase, self.step, self.slot)

    @property
    def is_control(self) -> bool:
        return self.kind == CONTROL_KIND
