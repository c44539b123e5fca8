"""The runs a sweep stands for, each a RunSpec and a run directory, all checked up front.

A run's directory says what it is: OUT/<variant>/<topology>/<key=value,...>/seed-<s>. The same
sweep file therefore finds its own runs again after an interruption, and `dfl-report OUT` groups
them by their resolved configs, seeds together.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.api.settings import keyword_spec
from launcher.config.inputs import resolve_inputs
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from launcher.sweep.spec import SweepSpec, Variant


@dataclass(frozen=True)
class Point:
    variant: Variant
    topology: str
    values: dict[str, Any]
    seed: int
    run_dir: Path
    request: RunSpec

    @property
    def label(self) -> str:
        values = " ".join(f"{k}={v}" for k, v in self.values.items())
        return f"{self.variant.name} {Path(self.topology).stem} {values} seed {self.seed}".replace(
            "  ", " ")


def slug(values: dict[str, Any]) -> str:
    """`lr=0.01,rho=0`: readable, and a legal file name whatever the values are."""
    if not values:
        return "defaults"
    text = ",".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in values.items())
    return re.sub(r"[^A-Za-z0-9._=,+-]", "_", text.replace('"', ""))


def points(spec: SweepSpec) -> list[Point]:
    """Every run of the sweep, in the order they run: variant, topology, values, then seed, so
    a report of a half-done sweep already holds whole groups."""
    assert spec.out is not None
    keys = list(spec.grid)
    out = []
    for variant, topology in itertools.product(spec.all_variants(), spec.topologies):
        for combo in itertools.product(*(spec.grid[k] for k in keys)):
            values = dict(zip(keys, combo, strict=True))
            where = spec.out / variant.name / Path(topology).stem / slug(values)
            for seed in spec.seeds:
                settings = {**spec.settings, **variant.settings, **values, "seed": seed}
                req = keyword_spec(topology, variant.protocol, variant.config, settings, {})
                out.append(Point(variant, topology, values, seed, where / f"seed-{seed}", req))
    return out


def check(points_: list[Point]) -> int:
    """Resolve every run's topology and config now: bad input anywhere in the grid is one line
    and exit 2 before the first mesh starts, not an hour into the sweep. The largest mesh's
    node count."""
    largest = 1
    for point in points_:
        try:
            topology, _ = resolve_inputs(point.request)
        except LaunchError as exc:
            raise LaunchError(f"{point.label}: {exc}") from None
        largest = max(largest, len(topology.nodes))
    return largest


@dataclass(frozen=True)
class CheckedSweep:
    """A sweep whose every run's inputs resolved (`check`): the CLI and `dfl_mesh.sweep` check
    before they import the runner, whose progress, finishing and result modules a refused
    sweep never needs (issue 45); `run_sweep` takes it as it is, checked once."""

    spec: SweepSpec
    points: list[Point]
    largest: int  # the largest mesh's node count


def checked(spec: SweepSpec) -> CheckedSweep:
    grid = points(spec)
    return CheckedSweep(spec, grid, check(grid))
