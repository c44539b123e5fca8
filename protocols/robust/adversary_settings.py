"""Declaring adversarial nodes: their behaviours, the topology attribute and the config section.

Torch-free, like a protocol's declaration: the launcher validates a topology file and a config
against these models and resolves them into the plan's `adversaries` section (node id -> the
behaviours, as plain JSON data) without importing torch. A node reads its own behaviours back
with `behaviours_of` (protocols/robust/adversary.py runs them).

A behaviour is one class, chosen by its `kind`; a node's behaviours are a list applied in order
(data poisoning to its shard, model attacks to what it sends). docs/protocols/robust.md says what
each does; docs/design/adversaries.md why it is declared this way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter, ValidationError, model_validator

from dfl_config.errors import DflMeshError
from dfl_config.section import (
    Count,
    Integer,
    NonNegative,
    NonNegativeInt,
    Number,
    Positive,
    Section,
    UnitInterval,
)

NodeKey = Annotated[int, Field(ge=0)]
"""A node id or class as a mapping's key: not strict, since JSON (the plan) writes keys as
text."""

Sees = Literal["own", "previous-round", "this-round"]
"""What an attacker that needs the honest models uses: its own model only, the models it
received last round, or (the omniscient attacker) its in-neighbours' models of this round."""

ADVERSARY_STREAM = "adversaries"
"""The numpy stream (placement_seed, -1, ADVERSARY_STREAM) a `fraction` is drawn from."""


class LabelFlip(Section):
    """Train on flipped labels: y -> mapping[y], or C - 1 - y without a mapping."""

    kind: Literal["label-flip"]
    mapping: dict[NodeKey, NonNegativeInt] | None = None


class Backdoor(Section):
    """Stamp a trigger (a size x size bright square) on `fraction` of the shard and label those
    samples `target` (BadNets' pattern)."""

    kind: Literal["backdoor"]
    target: NonNegativeInt = 0
    fraction: UnitInterval = 0.1
    size: Count = 3


class SignFlip(Section):
    """Send -v."""

    kind: Literal["sign-flip"]


class Scaled(Section):
    """Send factor * v."""

    kind: Literal["scaled"]
    factor: Number = -4.0


class Gaussian(Section):
    """Send v + std * N(0, I) (centre: sent), or std * N(0, I) alone (centre: zero, Blanchard
    et al.'s Gaussian Byzantine worker)."""

    kind: Literal["gaussian"]
    std: NonNegative = 1.0
    centre: Literal["sent", "zero"] = "sent"


SeesOthers = Literal["previous-round", "this-round"]
"""What an attack that reads its neighbours' models sees (`own` would show it none)."""


class Alie(Section):
    """A little is enough: mu - z sigma of the honest models it sees. z None: ALIE's z_max for
    the run's clients and adversaries, fixed in the plan."""

    kind: Literal["alie"]
    z: Number | None = None
    sees: SeesOthers = "previous-round"


class Ipm(Section):
    """Inner-product manipulation: -epsilon times the honest models' mean."""

    kind: Literal["ipm"]
    epsilon: Positive = 0.5
    sees: Sees = "previous-round"


class Dissensus(Section):
    """ClippedGossip's attack on each out-neighbour i: x_i - epsilon sum_j W_ij (x_j - x_i) /
    delta_i over the honest j it sees."""

    kind: Literal["dissensus"]
    epsilon: Positive = 1.0
    sees: SeesOthers = "previous-round"


ModelAttack = Annotated[Union[SignFlip, Scaled, Gaussian, Alie, Ipm, Dissensus],  # noqa: UP007
                        Field(discriminator="kind")]
"""An attack on what a node sends (one flat vector per message)."""


class Silent(Section):
    """Send the round-0 model every round and stop training (crash-like but alive)."""

    kind: Literal["silent"]


class PerNeighbour(Section):
    """A model attack per out-neighbour (`to: {id: attack}`); the neighbours not named get the
    honest message."""

    kind: Literal["per-neighbour"]
    to: dict[NodeKey, ModelAttack]


Behaviour = Annotated[
    Union[LabelFlip, Backdoor, SignFlip, Scaled, Gaussian, Alie, Ipm, Dissensus,  # noqa: UP007
          Silent, PerNeighbour],
    Field(discriminator="kind")]

DATA_KINDS = ("label-flip", "backdoor")
"""Behaviours that act on the node's training shard (the rest act on what it sends)."""
SEES_KINDS = ("alie", "ipm", "dissensus")
"""Attacks computed from the honest models the adversary sees."""


def _checked_list(behaviours: list[Any]) -> list[Any]:
    """One list of behaviours a node can run: at least one, at most one message-level regime
    (silence and a per-neighbour map replace every other attack on messages)."""
    if not behaviours:
        raise ValueError("an adversary needs at least one behaviour")
    kinds = [b.kind for b in behaviours]
    for alone in ("silent", "per-neighbour"):
        if alone in kinds:
            others = [k for k in kinds if k not in DATA_KINDS and k != alone]
            if others or kinds.count(alone) > 1:
                raise ValueError(f"{alone} decides every message, so it cannot be combined "
                                 f"with {(others or [alone])[0]}")
    return behaviours


Behaviours = Annotated[list[Behaviour], Field(min_length=1)]


class AdversaryAttributes(Section):
    """The topology node attribute: `adversary: [{kind: sign-flip}, ...]`."""

    adversary: Behaviours | None = None

    @model_validator(mode="after")
    def runnable(self) -> AdversaryAttributes:
        if self.adversary is not None:
            _checked_list(self.adversary)
        return self


class AdversariesSection(Section):
    """The config's `adversaries:` section: these nodes (`nodes`) or round(fraction * clients)
    nodes drawn from `placement_seed` (None: the run's seed), each running `behaviour`."""

    nodes: list[NonNegativeInt] | None = None
    fraction: UnitInterval | None = None
    placement_seed: Integer | None = None
    behaviour: list[Behaviour] = Field(default_factory=list)

    @model_validator(mode="after")
    def one_way(self) -> AdversariesSection:
        if self.nodes is not None and self.fraction is not None:
            raise ValueError("give nodes or fraction, not both")
        if self.placement_seed is not None and self.fraction is None:
            raise ValueError("placement_seed draws a fraction; it needs fraction")
        chosen = self.nodes if self.nodes is not None else self.fraction
        if chosen and not self.behaviour:
            raise ValueError("behaviour: the adversaries need at least one behaviour")
        if self.behaviour:
            _checked_list(self.behaviour)
        return self


class AdversaryError(ValueError, DflMeshError):
    """A declaration of adversaries the run cannot honour (one line)."""


_BEHAVIOURS: TypeAdapter[list[Any]] = TypeAdapter(list[Behaviour])


def behaviours_of(data: Sequence[Mapping[str, Any]]) -> list[Any]:
    """A plan's resolved behaviours (JSON data) as their models."""
    try:
        return _BEHAVIOURS.validate_python(list(data))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise AdversaryError(f"plan: adversary behaviour {where}: {first['msg']}") from None


def dumped(behaviours: Sequence[Any]) -> list[dict[str, Any]]:
    """Behaviours as the plan holds them: every field, defaults included, so that a later
    default cannot change what a recorded run's adversaries did."""
    return [b.model_dump(mode="json") for b in behaviours]


def drawn(clients: Sequence[int], fraction: float, placement_seed: int) -> list[int]:
    """round(fraction * clients) of `clients`, drawn from the numpy stream
    (placement_seed, -1, "adversaries"), ascending: every process and a resume draw the same."""
    from dfl_node.learning.seeds import numpy_stream  # numpy only when a fraction is drawn

    count = round(fraction * len(clients))
    rng = numpy_stream(placement_seed, -1, ADVERSARY_STREAM)
    chosen = rng.choice(len(clients), size=count, replace=False)
    return sorted(int(clients[int(i)]) for i in chosen)
