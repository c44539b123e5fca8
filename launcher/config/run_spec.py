"""RunSpec: everything one run needs, as one typed request; the launcher takes only it.

Each front end builds it its own way and none goes through another's: the command line from
its parsed options (launcher/config/options.py), `dfl_mesh.run` from keywords and Python values
(launcher/api/settings.py), a sweep and a reproduction from their files through the same
keywords (launcher/sweep/grid.py). Resolving it (launcher/config/inputs.py) gives the config
and the plan, whichever front end made it, so the same run asked two ways is the same spec.

A run records its spec as `inputs.json` (`recorded`), which `--resume` reads back
(`from_record`) and a rerun into the same directory compares (launcher/run/claim.py). That
record's form predates the spec and runs in flight resume by it, so it is kept byte for byte:
the options with every key, unset ones null; each override as `key=value` text.

Every field but `objects` holds data: a topology by file or shipped name, a protocol by name,
config values. `objects` holds what `dfl_mesh.run` was handed as Python objects instead (a
graph, a ProtocolNode class, a model factory, arrays: launcher/config/given.py); `topology` and
`protocol` then hold their names, for messages and the run directory's name. Only a
description of the objects is recorded, under inputs.json's `objects` key, which a run without
them does not have (so its record stays byte for byte what it was).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from typing_extensions import TypedDict

from dfl_config.limits import MAX_SET_CHARS
from launcher.config.given import OBJECTS_KEY, GivenObjects
from launcher.errors import LaunchError


def path_text(value: Any) -> Any:
    """A path given as a `Path` is the same path as its text (what the command line passes)."""
    return os.fspath(value) if isinstance(value, os.PathLike) else value


PathText = Annotated[str, BeforeValidator(path_text)]


def parsed_overrides(items: Any) -> Any:
    """Overrides given as `--set`'s `key=value` text are parsed as `--set` parses them."""
    if isinstance(items, list | tuple):
        return tuple(Override.parse(item) if isinstance(item, str) else item for item in items)
    return items


@dataclass(frozen=True)
class Override:
    """One config key over every layer before it: `--set key=value`, or `lr=0.05` in Python.

    `key` is dotted for a nested key; a bare protocol hyper-parameter is placed under `hyper` at
    resolution (launcher/config/layers.py). `text` is the YAML the command line was given,
    kept only so that the run's record says what was typed (a `lr=5e-2` stays `lr=5e-2`); it is
    how the value was written, not what it is, so two overrides of one value are equal.
    """

    key: str
    value: Any
    text: str | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, item: str) -> Override:
        """`key=value` as `--set` takes it, the value read as YAML (text that is no YAML stays
        text); a LaunchError for an item without `=` or too long to be one."""
        if len(item) > MAX_SET_CHARS:
            raise LaunchError(f"--set {item[:40]!r}...: {len(item)} characters, more than one "
                              f"--set may hold ({MAX_SET_CHARS})")
        if "=" not in item:
            raise LaunchError(f"--set {item!r}: expected key=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        return cls(key, value, raw)

    @property
    def item(self) -> str:
        """`key=value`, as the record holds it and messages name it: the text given, else the
        value as JSON (which YAML reads back as the same value)."""
        return f"{self.key}={self.text if self.text is not None else json.dumps(self.value)}"


class WireOptions(TypedDict, total=False):
    """The run options under the config's `wire` section; only those given are present."""

    deadline_s: float
    on_failure: str


class RunOptions(BaseModel):
    """The run options with a flag of their own (`--rounds`, ...), each a config key of the
    same name (launcher/config/layers.py: option_layers); None: not given, the config decides.
    Declared in the order the record has always listed them."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    rounds: int | None = None
    seed: int | None = None
    dataset: str | None = None
    data_root: PathText | None = None
    partition: str | None = None
    eval_every: int | None = None
    transport: str | None = None
    checkpoint_every: int | None = None
    on_corrupt: str | None = None
    secure: bool | None = None
    keys: PathText | None = None
    wire: WireOptions | None = None


WIRE_OPTIONS = {"deadline": "deadline_s", "on_failure": "on_failure"}
"""The run options that set a key of the config's `wire` section: option name -> key."""
OPTION_NAMES = frozenset(RunOptions.model_fields) - {"wire"} | frozenset(WIRE_OPTIONS)
"""Every run option by the name the command line's parser and `dfl_mesh.run` give it."""


def options_of(named: Mapping[str, Any]) -> dict[str, Any]:
    """RunSpec's `options` from run options by their names (`deadline`, not `wire`); a name
    absent or None is not given. Validated with the spec (`RunSpec.of`)."""
    wire = {key: named[name] for name, key in WIRE_OPTIONS.items() if named.get(name) is not None}
    return {**{k: named.get(k) for k in RunOptions.model_fields if k != "wire"},
            "wire": wire or None}


class RunSpec(BaseModel):
    """What one run is asked to be: topology, protocol, config file, run options, overrides.

    `seeds`: the command line's `--seeds A-B`, one run per seed (launcher/launch.py: launch);
    a spec with seeds is many runs and only `launch` takes it. `objects`: the parts handed over
    as Python objects (None: none).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True,
                              defer_build=True)

    topology: PathText | None = None
    protocol: str | None = None
    config_file: Path | None = None
    options: RunOptions = Field(default_factory=RunOptions)
    sets: Annotated[tuple[Override, ...], BeforeValidator(parsed_overrides)] = ()
    seeds: tuple[int, ...] = ()
    objects: GivenObjects | None = None

    @model_validator(mode="after")
    def one_seed_or_a_range(self) -> RunSpec:
        if self.options.seed is not None and self.seeds:
            raise ValueError("--seed and --seeds exclude each other")
        return self

    @classmethod
    def of(cls, **fields: Any) -> RunSpec:
        """The spec of these fields, validated; a LaunchError naming the first wrong one."""
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            raise LaunchError(one_error(exc)) from None

    def with_seed(self, seed: int) -> RunSpec:
        """One run of a `seeds` range."""
        return self.model_copy(update={"options": self.options.model_copy(update={"seed": seed}),
                                       "seeds": ()})

    def recorded(self) -> dict[str, Any]:
        """The body of the run's inputs.json: what a later `--resume` resolves again; paths
        made absolute so any working directory finds them."""
        topology = Path(self.topology) if self.topology else None
        objects = self.objects
        body = {"topology": str(topology.resolve())
                if topology and topology.exists() and not (objects and objects.topology)
                else self.topology,
                "protocol": self.protocol,
                "config_file": str(self.config_file.resolve()) if self.config_file else None,
                "options": self.options.model_dump(), "sets": [o.item for o in self.sets]}
        if objects is not None:
            body[OBJECTS_KEY] = objects.described()
        return body

    @classmethod
    def from_record(cls, body: dict[str, Any]) -> RunSpec:
        """The spec an inputs.json holds (KeyError, TypeError or LaunchError where it is none)."""
        return cls.of(topology=body["topology"], protocol=body["protocol"],
                      config_file=Path(body["config_file"]) if body["config_file"] else None,
                      options=body["options"], sets=body["sets"])


def one_error(exc: ValidationError) -> str:
    """A spec's first validation error as one line: `name=value: reason`."""
    err = exc.errors()[0]
    reason = err["msg"].removeprefix("Value error, ")
    names = [str(part) for part in err["loc"] if part != "options"]
    return f"{names[-1]}={err['input']!r}: {reason}" if names else reason
