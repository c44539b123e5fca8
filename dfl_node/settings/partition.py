"""`partition`: which training samples each node holds, as a typed value (the partitioners
themselves are in dfl_node/learning/partition.py).

Users, YAML files and plans spell it as a string (`iid`, `shards:C[:ordered]`,
`dirichlet:ALPHA[:MIN]`,
and `given`, which the launcher sets for arrays handed over one set per node);
the string is parsed here once, when a config or a plan is validated, so a misspelt one is
refused at planning and the runtime dispatches on the type. A parsed value writes back the very
string it was read from ("dirichlet:0.10" stays that, not "dirichlet:0.1"): plan.json and its
section hashes, which a resumed run compares, keep their bytes.

One parser for the user's config (launcher/config/run_settings.py) and the plan's data section
(dfl_node/settings/data_section.py): `Partition` is the field type of both.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, PlainSerializer, PrivateAttr, WithJsonSchema

from dfl_config.errors import DflMeshError
from dfl_config.section import Section

DIRICHLET_MIN_SIZE = 64
"""A Dirichlet part's fewest samples when the spec gives none: 2 batches of 32, so both DMFL-SQ
batches fit in a shard."""
KNOWN = "iid, shards:C[:ordered], dirichlet:ALPHA[:MIN]"
GIVEN_PARTITION = "given"


class PartitionError(ValueError, DflMeshError):
    pass


class PartitionKind(Section):
    """A parsed `partition`; `str()` is its spelling."""

    _spelling: str = PrivateAttr("")

    @abstractmethod
    def canonical(self) -> str:
        """The spelling of a value built in code rather than parsed."""

    def __str__(self) -> str:
        return self._spelling or self.canonical()


class IidPartition(PartitionKind):
    """`iid`: a seeded permutation cut into near-equal parts."""

    kind: Literal["iid"] = "iid"

    def canonical(self) -> str:
        return "iid"


class ShardsPartition(PartitionKind):
    """`shards:C`: the SSD-FL slot scheme, C consecutive classes per device
    (docs/protocols/ssd-fl.md#e4); whether C fits the dataset's classes is the partitioner's
    check, which knows them."""

    kind: Literal["shards"] = "shards"
    per_node: int
    """C: classes per device."""
    ordered: bool = False
    """`shards:C:ordered`: the node in position d is device d, no permutation, so that a
    graph can be built around who holds which classes (ClippedGossip's dumbbell: one clique
    holds digits 0-4, the other 5-9, for every seed)."""

    def canonical(self) -> str:
        return f"shards:{self.per_node}" + (":ordered" if self.ordered else "")


class DirichletPartition(PartitionKind):
    """`dirichlet:ALPHA[:MIN]`: per-class shares ~ Dir(ALPHA 1), redrawn until every part
    holds MIN samples."""

    kind: Literal["dirichlet"] = "dirichlet"
    alpha: float
    """The concentration: small is skewed, large near iid."""
    min_size: int | None = None
    """MIN; None: the spec gives none, DIRICHLET_MIN_SIZE applies."""

    @property
    def minimum(self) -> int:
        return DIRICHLET_MIN_SIZE if self.min_size is None else self.min_size

    def canonical(self) -> str:
        tail = "" if self.min_size is None else f":{self.min_size}"
        return f"dirichlet:{self.alpha!r}{tail}"


class GivenPartition(PartitionKind):
    """`given`: each client holds the training arrays it was handed (`dfl_mesh.run(dataset=
    {"train": [...]})`, dfl_node/learning/given.py); the data section's `node_sizes` say how
    many rows each."""

    kind: Literal["given"] = "given"

    def canonical(self) -> str:
        return GIVEN_PARTITION


ParsedPartition = IidPartition | ShardsPartition | DirichletPartition | GivenPartition


def parse_count(spec: str, text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise PartitionError(f"partition {spec!r}: {text!r} is not a whole number")
    return int(text)


def parse_alpha(spec: str, text: str) -> float:
    try:
        alpha = float(text)
    except ValueError:
        alpha = float("nan")
    if not 0 < alpha < float("inf"):
        raise PartitionError(f"partition {spec!r}: alpha {text!r} must be a positive number")
    return alpha


def parse_partition(spec: str) -> ParsedPartition:
    """The typed value of a `--partition` string; PartitionError (one line) on a bad one."""
    kind, *args = spec.split(":")
    parsed: ParsedPartition
    if kind == "iid" and not args:
        parsed = IidPartition()
    elif kind == "shards" and len(args) in (1, 2) and args[1:] in ([], ["ordered"]):
        parsed = ShardsPartition(per_node=parse_count(spec, args[0]), ordered=args[1:] != [])
    elif kind == "dirichlet" and len(args) in (1, 2):
        parsed = DirichletPartition(alpha=parse_alpha(spec, args[0]),
                                    min_size=parse_count(spec, args[1]) if args[1:] else None)
    elif spec == GIVEN_PARTITION:
        parsed = GivenPartition()
    else:
        raise PartitionError(f"unknown partition {spec!r} (known: {KNOWN})")
    parsed._spelling = spec
    return parsed


def _parsed(value: Any) -> Any:
    """A string is parsed; a parsed value passes as it is; anything else is refused."""
    if isinstance(value, str):
        return parse_partition(value)
    if isinstance(value, PartitionKind):
        return value
    raise PartitionError(f"must be a partition string ({KNOWN}), got {value!r}")


Partition = Annotated[
    ParsedPartition,
    BeforeValidator(_parsed),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "description": f"One of {KNOWN}.",
                    "pattern": r"^(iid|shards:[0-9]+|dirichlet:[^:]+(:[0-9]+)?)$"}),
]
"""The field type of a `partition`: validated from its string, written back as that string."""
