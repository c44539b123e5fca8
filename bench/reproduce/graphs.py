"""Graphs an experiment generates (a paper's graph families, or smaller ones for a quick
budget), written once under OUT/topologies when the first run needs them, so that every run of
the experiment reads the same file, a resumed experiment finds it again, and a command refused
before any run leaves nothing behind."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from topologies.model import Topology
from topologies.writer import write_topology

_pending: dict[str, Callable[[], Topology]] = {}


def topology_file(out: Path, name: str, make: Callable[[], Topology]) -> str:
    """OUT/topologies/NAME.yaml, to be written by `materialize` from `make`."""
    path = str(out / "topologies" / f"{name}.yaml")
    _pending[path] = make
    return path


def materialize(topology: str) -> None:
    """Write a generated topology's file if it is one and not there yet."""
    make = _pending.get(topology)
    path = Path(topology)
    if make is not None and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_topology(replace(make(), name=path.stem), path,
                       header=f"bench.reproduce graph {path.stem}")
