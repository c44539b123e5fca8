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


def _at_least(low: float, strict: bool) -> AfterValidator:
    def check(value: float) -> float:
        if value < low or (strict and value == low):
            raise ValueError(f"must be {'>' if strict else '>='} {low:g}")
        return value
    return AfterValidator(check)


Number = Annotated[float, BeforeValidator(_no_bool), AfterValidator(_finite)]
"""A finite real number; an int or the text '1e30' is read as one."""
Positive = Annotated[Number, _at_least(0, strict=True)]
NonNegative = Annotated[Number, _at_least(0, strict=False)]
def _at_most(high: float) -> AfterValidator:
    def check(value: float) -> float:
        if value > high:
            raise ValueError(f"must be <= {high:g}")
        return value
    return AfterValidator(check)


UnitInterval = Annotated[Number, _at_least(0, strict=False), _at_most(1)]
"""A number in [0, 1]: an accuracy, a probability, a ratio."""
Integer = Annotated[int, Strict()]
"""An integer written as one: not `true`, not 2.0."""
def _positive_integer(value: int) -> int:
    if value < 1:
        raise ValueError("must be a positive integer")
    return value


Count = Annotated[Integer, AfterValidator(_positive_integer)]
"""An integer >= 1."""
NonNegativeInt = Annotated[Integer, _at_least(0, strict=False)]
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
