"""The base of every configuration model, and the value types settings share.

Why pydantic with `extra="forbid"`: a misspelt key must be refused, never run with a silent
default. Numbers are lax where YAML is ambiguous (YAML 1.1 reads `1e30` as the text '1e30', so a
float field accepts that text) and strict where a bool would slip through (`true` is not 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Union, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Strict,
    Tag,
)

from dfl_config.field_docs import field_docstrings


class Section(BaseModel):
    """A config mapping: unknown keys refused, values validated, defaults declared here only."""

    # Built on first use, not on import (a refusal of bad input loads every protocol's models
    # and checks one), and described from the docstrings under the fields, read once per module
    # (dfl_config/field_docs.py: pydantic's `use_attribute_docstrings` costs ms per model).
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True,
                              defer_build=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        fields = cls.__pydantic_fields__
        for name, doc in field_docstrings(cls).items():
            if name in fields and fields[name].description is None:
                fields[name].description = doc

    def as_dict(self) -> dict[str, Any]:
        """Plain data for the run plan and summary.json (what the nodes read)."""
        return self.model_dump(mode="json")


def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("must be a number, not true/false")
    return value


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


Number = Annotated[float, BeforeValidator(_no_bool), AfterValidator(_finite)]
"""A finite real number; an int or the text '1e30' is read as one."""
# Bounds are pydantic's own constraints (in the JSON Schema too); dfl_config.problems says a
# broken one as `must be > 0, got -1`.
Positive = Annotated[Number, Field(gt=0)]
NonNegative = Annotated[Number, Field(ge=0)]
UnitInterval = Annotated[Number, Field(ge=0, le=1)]
"""A number in [0, 1]: an accuracy, a probability, a ratio."""
Fraction = Annotated[Number, Field(ge=0, lt=1)]
"""A number in [0, 1): a loss probability (1 would retransmit forever), a draw of a rate."""
Integer = Annotated[int, Strict()]
"""An integer written as one: not `true`, not 2.0."""
Count = Annotated[Integer, Field(ge=1)]
"""An integer >= 1."""
NonNegativeInt = Annotated[Integer, Field(ge=0)]
Flag = Annotated[bool, Strict()]
"""`true` or `false`, nothing that merely converts to one."""


def tagged_union(alternatives: tuple[type[Section], ...], key: str, default: str) -> Any:
    """A section that is one of `alternatives`, chosen by its `key` field (each alternative
    declares `key: Literal["its-tag"]`); a mapping without `key` is the `default` alternative.

    Why a default: a user overriding one option (`--set hyper.compressor.sparsifier.ratio=0.05`)
    should not have to repeat the kind, and a misspelt option then reads as an unknown key of
    that kind, with a suggestion, not as a missing tag."""

    def tag(value: Any) -> Any:
        if isinstance(value, Mapping):
            return value.get(key, default)
        return getattr(value, key, default)  # not a mapping: the default kind says why

    tagged = tuple(Annotated[alt, Tag(_tag_of(alt, key))] for alt in alternatives)
    tag.__name__ = key  # pydantic names the discriminator `key()` in its errors
    return Annotated[Union[tagged], Discriminator(tag)]  # noqa: UP007


def _tag_of(alternative: type[Section], key: str) -> str:
    (value,) = get_args(alternative.model_fields[key].annotation)
    return str(value)
