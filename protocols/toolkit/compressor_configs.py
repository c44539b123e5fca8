"""The `compressor:` setting as typed specs: what a config may write, validated, then built.

Every spelling is a mapping with a `type`, or the two parts of C = Q o S:

    {type: identity}
    {type: topk | randk, ratio: r | k: n[, scope: global]}           a sparsifier alone
    {type: uniform[, bits: b][, rounding: nearest | stochastic][, scale: per_message]}
    {sparsifier: S | null, quantizer: Q | null}                      Q(S(v)); a missing part
                                                                     is none, both none: identity

Each part is a pydantic union discriminated on `type`, so a misspelt type or key is one line
with the closest known one (dfl_config/problems.py). The two-part form carries the implied type
`composed`, which is never written out.

Compressors are a plugin point: a package adds a sparsifier or a quantizer by registering its
spec class under the entry-point group `dfl_mesh.sparsifiers` or `dfl_mesh.quantizers`; the class
is a pydantic model with a `type: Literal[...]` field and `build()` returning a `Sparsifier` or
a `Quantizer` (protocols/toolkit/compressors.py). A type name two packages register (or one
that clashes with dfl-mesh's own) is refused, not resolved by install order: the unions leave it
out, and a config that names it gets one line naming both packages.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Literal,
    Protocol,
    Self,
    Union,
    get_args,
    get_origin,
)

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from dfl_config.plugins import HOME, PluginLoadError, group_entry_points, package_of
from dfl_config.problems import one_line
from dfl_config.section import Count, Integer, Number, Section, tagged_union
from protocols.toolkit.accounting import MAX_BITS

if TYPE_CHECKING:  # built by build(), which imports them: a spec is read without torch
    from protocols.toolkit.compressors import (
        Compressor,
        Quantizer,
        RandK,
        Sparsifier,
        TopK,
        Uniform,
    )

SPARSIFIER_GROUP = "dfl_mesh.sparsifiers"
QUANTIZER_GROUP = "dfl_mesh.quantizers"
COMPOSED: Literal["composed"] = "composed"


def _ratio(value: float) -> float:
    if not 0 < value <= 1:
        raise ValueError("must be a number in (0, 1]")
    return value


def _bits(value: int) -> int:
    if not 1 <= value <= MAX_BITS:
        raise ValueError(f"must be an integer in 1..{MAX_BITS}")
    return value


class SparsifierConfig(Section):
    """Base of a sparsifier's spec: keeps some entries of v."""

    type: str
    """The name that selects it: a subclass narrows it to `Literal["name"]`."""

    @abstractmethod
    def build(self) -> Sparsifier: ...


class QuantizerConfig(Section):
    """Base of a quantiser's spec: codes the values that travel."""

    type: str
    """The name that selects it: a subclass narrows it to `Literal["name"]`."""

    @abstractmethod
    def build(self) -> Quantizer: ...


class _BudgetConfig(SparsifierConfig):
    ratio: Annotated[Number, AfterValidator(_ratio)] | None = None
    """k = max(1, ceil(ratio P)), ratio in (0, 1]."""
    k: Count | None = None
    """k itself (exactly one of ratio and k)."""
    scope: Literal["global"] = "global"
    """Over the whole flattened model."""

    @model_validator(mode="after")
    def _one_budget(self) -> Self:
        if (self.ratio is None) == (self.k is None):
            raise ValueError("give exactly one of ratio and k")
        return self


class TopKConfig(_BudgetConfig):
    """Top_k: the k largest magnitudes, ties to the lower position."""

    type: Literal["topk"] = "topk"

    def build(self) -> TopK:
        from protocols.toolkit.compressors import TopK

        return TopK(ratio=self.ratio, k=self.k)


class RandKConfig(_BudgetConfig):
    """Rand_k: k positions uniformly at random (the run's compressor stream)."""

    type: Literal["randk"] = "randk"

    def build(self) -> RandK:
        from protocols.toolkit.compressors import RandK

        return RandK(ratio=self.ratio, k=self.k)


class UniformConfig(QuantizerConfig):
    """Q_b: the support-preserving uniform b-bit quantiser, one scale per message."""

    type: Literal["uniform"] = "uniform"
    bits: Annotated[Integer, AfterValidator(_bits)] = 8
    """b, bits per code."""
    rounding: Literal["nearest", "stochastic"] = "nearest"
    scale: Literal["per_message"] = "per_message"

    def build(self) -> Uniform:
        from protocols.toolkit.compressors import Uniform

        return Uniform(bits=self.bits, rounding=self.rounding)


class IdentityConfig(Section):
    """No compression: P float32 values."""

    type: Literal["identity"] = "identity"

    def build(self) -> Compressor:
        from protocols.toolkit.compressors import Identity

        return Identity()


# Discovery: the shipped specs and the entry points', by type name.


class _EntryPoint(Protocol):
    """What discovery reads of an entry point (tests hand in their own)."""

    @property
    def name(self) -> str: ...

    def load(self) -> Any: ...


@dataclass(frozen=True)
class Registered:
    """The spec classes of each part's union, and the type names refused for a clash."""

    sparsifiers: tuple[type[BaseModel], ...]
    quantizers: tuple[type[BaseModel], ...]
    clashes: Mapping[str, tuple[str, ...]]  # type name -> the packages that register it
    failed: Mapping[str, str] = field(default_factory=dict)
    """Entry points left out (`dfl-launch plugins` lists them): entry point -> why, naming
    the package. A spec's type names are read from its class, so a part that fails to load
    has none, and a config naming it reads as an unknown type."""


def type_names(cls: type[BaseModel]) -> tuple[str, ...]:
    """The values of a spec class's `type: Literal[...]` field."""
    declared = cls.model_fields.get("type")
    if declared is None or get_origin(declared.annotation) is not Literal:
        return ()
    return tuple(str(name) for name in get_args(declared.annotation))


def _load(ep: EntryPoint | _EntryPoint, group: str) -> type[BaseModel]:
    try:
        cls = ep.load()
    except Exception as exc:
        raise PluginLoadError(f"{group} entry point {ep.name!r} of {package_of(ep)} "
                              f"cannot be loaded: {type(exc).__name__}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, BaseModel) and type_names(cls)
            and callable(getattr(cls, "build", None))):
        raise TypeError(f"entry point {ep.name!r} of {package_of(ep)} in {group} is not a "
                        "pydantic model with a `type: Literal[...]` field and a build()")
    return cls


def discover(shipped: Mapping[str, Iterable[type[BaseModel]]],
             found: Mapping[str, Iterable[EntryPoint | _EntryPoint]]) -> Registered:
    """Each part's spec classes, from the shipped ones and the entry points `found` per group.

    Type names are one namespace over both parts and the whole compressor (identity,
    composed), so that any spelling names one spec."""
    owners: dict[str, set[tuple[str, type[BaseModel]]]] = {
        "identity": {(HOME, IdentityConfig)}, COMPOSED: {(HOME, CompositeConfig)}}
    members: dict[str, list[type[BaseModel]]] = {}
    failed: dict[str, str] = {}
    for group in (SPARSIFIER_GROUP, QUANTIZER_GROUP):
        members[group] = list(shipped.get(group, ()))
        for cls in members[group]:
            for name in type_names(cls):
                owners.setdefault(name, set()).add((HOME, cls))
        for ep in found.get(group, ()):
            try:
                cls = _load(ep, group)
            except TypeError as exc:  # PluginLoadError, or not a spec class
                failed[f"{group}:{ep.name}"] = str(exc).splitlines()[0]
                continue
            members[group].append(cls)
            for name in type_names(cls):
                owners.setdefault(name, set()).add((package_of(ep), cls))
    clashes = {name: tuple(sorted(package for package, _ in owned))
               for name, owned in owners.items() if len(owned) > 1}

    def clear(classes: list[type[BaseModel]]) -> tuple[type[BaseModel], ...]:
        kept = [cls for cls in classes if not set(type_names(cls)) & set(clashes)]
        return tuple(dict.fromkeys(kept))

    return Registered(clear(members[SPARSIFIER_GROUP]), clear(members[QUANTIZER_GROUP]), clashes,
                      failed)


def _refuse_clashes(clashes: Mapping[str, tuple[str, ...]]) -> BeforeValidator:
    def check(value: Any) -> Any:
        kind = value.get("type") if isinstance(value, Mapping) else None
        if isinstance(kind, str) and kind in clashes:
            raise ValueError(f"type {kind!r} is registered by several packages "
                             f"({' and '.join(clashes[kind])}); uninstall one of them")
        return value
    return BeforeValidator(check)


def _none_left(value: Any) -> Any:
    raise ValueError(f"unknown type {value.get('type')!r}: no spec of this part is installed")


def _union(classes: tuple[type[BaseModel], ...], clashes: Mapping[str, tuple[str, ...]]) -> Any:
    if not classes:  # every one clashed: a config naming one is told why
        return Annotated[dict[str, Any], AfterValidator(_none_left), _refuse_clashes(clashes)]
    if len(classes) == 1:
        return Annotated[classes[0], _refuse_clashes(clashes)]
    # A part without `type` is the first kind (topk, uniform): `--set ...sparsifier.ratio=0.05`
    # needs no kind, and a misspelt key reads as one (dfl_config.section.tagged_union).
    return Annotated[tagged_union(classes, "type", _tag(classes[0])),  # type: ignore[arg-type]
                     _refuse_clashes(clashes)]


def _tag(cls: type[BaseModel]) -> str:
    (value,) = get_args(cls.model_fields["type"].annotation)
    return str(value)


def _implied_composed(value: Any) -> Any:
    """The two-part spelling has no `type`: it is `composed`."""
    if isinstance(value, Mapping) and "type" not in value:
        return {**value, "type": COMPOSED}
    return value


SHIPPED = {SPARSIFIER_GROUP: (TopKConfig, RandKConfig), QUANTIZER_GROUP: (UniformConfig,)}


class CompositeConfig(Section):
    """Q(S(v)): the sparsifier's entries, their values quantised; either part may be none."""

    type: Literal["composed"] = Field(default=COMPOSED, exclude=True)
    sparsifier: SparsifierPart | None = None
    quantizer: QuantizerPart | None = None

    def build(self) -> Compressor:
        s = None if self.sparsifier is None else self.sparsifier.build()
        q = None if self.quantizer is None else self.quantizer.build()
        from protocols.toolkit.compressors import Composed, Identity

        if s is not None and q is not None:
            return Composed(s, q)
        return s or q or Identity()


REGISTERED = discover(SHIPPED, {group: group_entry_points(group)
                                for group in (SPARSIFIER_GROUP, QUANTIZER_GROUP)})

if TYPE_CHECKING:
    SparsifierPart = SparsifierConfig
    QuantizerPart = QuantizerConfig
    CompressorConfig = CompositeConfig | IdentityConfig | SparsifierConfig | QuantizerConfig
else:
    SparsifierPart = _union(REGISTERED.sparsifiers, REGISTERED.clashes)
    QuantizerPart = _union(REGISTERED.quantizers, REGISTERED.clashes)
    CompressorConfig = Annotated[
        Union[(CompositeConfig, IdentityConfig, *REGISTERED.sparsifiers,
               *REGISTERED.quantizers)],
        Field(discriminator="type"), _refuse_clashes(REGISTERED.clashes),
        BeforeValidator(_implied_composed)]
CompositeConfig.model_rebuild()


def compressor_config(data: Any) -> CompressorConfig:
    """A `compressor:` mapping, validated; ValueError with one line on a bad one."""
    adapter: TypeAdapter[CompressorConfig] = TypeAdapter(CompressorConfig)
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        raise ValueError(one_line(exc, adapter.json_schema(), ("compressor",))) from None


def build_compressor(spec: CompressorConfig) -> Compressor:
    """The compressor a validated spec describes."""
    return spec.build()
