"""SWEEP.yaml: what to vary, what to fix, where the runs go (docs/sweeps.md).

    out: runs/lr-sweep             # default: runs/sweeps/<file name>
    protocols: [NAME, NAME]        # each with its defaults; and/or named variants:
    variants:
      - {name: no-fairness, protocol: NAME, config: paper.yaml, settings: {rho: 0}}
    topologies: [ring20]
    seeds: 0-1                     # A-B, or a list
    grid: {lr: [0.01, 0.05]}       # any config key or run option -> its values
    settings: {rounds: 20}         # every run; run options or config keys, as dfl_mesh.run's
    parallel: auto                 # meshes at once (auto: as the cores allow)

Relative paths (out, config files, topology files) are relative to the sweep file, so a sweep
file and its configs travel together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from dfl_config.section import Section
from launcher.config.options import parse_seeds
from launcher.errors import LaunchError


class Variant(Section):
    """One way to run: a protocol with its own config file and settings, named for the report
    and the run directories."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
    protocol: str
    config: Path | None = None
    settings: dict[str, Any] = Field(default_factory=dict)


class SweepSpec(Section):
    out: Path | None = None
    protocols: list[str] = Field(default_factory=list)
    variants: list[Variant] = Field(default_factory=list)
    topologies: list[str] = Field(min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    parallel: int | Literal["auto"] = "auto"

    @field_validator("seeds", mode="before")
    @classmethod
    def seed_range(cls, value: Any) -> Any:
        """`0-4` as the command line's `--seeds` reads it (one parser for both)."""
        if isinstance(value, str):
            try:
                return list(parse_seeds(value))
            except LaunchError as exc:
                raise ValueError(str(exc).removeprefix("--seeds: ")) from None
        return [value] if isinstance(value, int) else value

    @field_validator("grid")
    @classmethod
    def non_empty_axes(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in grid.items():
            if not values:
                raise ValueError(f"grid.{key}: give at least one value")
        return grid

    def all_variants(self) -> list[Variant]:
        """The named variants, then one per listed protocol (its defaults)."""
        out = [*self.variants, *(Variant(name=p, protocol=p) for p in self.protocols)]
        if not out:
            raise LaunchError("a sweep needs `protocols` or `variants`")
        names = [v.name for v in out]
        if len(set(names)) != len(names):
            raise LaunchError(f"variant names must differ: {names}")
        return out

    def rooted(self, base: Path) -> SweepSpec:
        """Relative paths made relative to `base` (the sweep file's folder)."""
        def under(path: Path | None) -> Path | None:
            return None if path is None or path.is_absolute() else base / path

        def topology(name: str) -> str:  # a file next to the sweep, else a shipped name
            beside = base / name
            return str(beside) if not Path(name).is_absolute() and beside.is_file() else name

        variants = [v.model_copy(update={"config": under(v.config) or v.config})
                    for v in self.variants]
        return self.model_copy(update={"out": under(self.out) or self.out,
                                       "variants": variants,
                                       "topologies": [topology(t) for t in self.topologies]})


def load_spec(path: Path) -> SweepSpec:
    """The sweep file, validated; one line naming the file and the field where it is wrong."""
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise LaunchError(f"{path}: no such sweep file") from None
    except (OSError, yaml.YAMLError) as exc:
        raise LaunchError(f"{path}: unreadable: {str(exc).splitlines()[0]}") from None
    try:
        spec = SweepSpec.model_validate(data if data is not None else {})
    except ValidationError as exc:
        raise LaunchError(f"{path}: {one_error(exc)}") from None
    spec = spec.rooted(path.parent)
    if spec.out is None:
        spec = spec.model_copy(update={"out": Path("runs") / "sweeps" / path.stem})
    return spec


def from_mapping(data: dict[str, Any]) -> SweepSpec:
    """A sweep given in Python (`dfl_mesh.sweep(protocols=..., ...)`), validated alike."""
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise LaunchError(f"sweep: {one_error(exc)}") from None


def one_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(part) for part in err["loc"]) or "the file"
    return f"{where}: {err['msg']}"
