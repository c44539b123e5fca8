"""`dfl-topology`: generate topology files and show what a topology file holds.

    dfl-topology generate erdos-renyi -n 30 --p 0.1 --seed 0 --repair bridge -o er30.yaml
    dfl-topology show er30.yaml          # or a shipped name: dfl-topology show ring20

Bad input of any kind (an invalid file, a bad option, a missing file) prints exactly one line,
`dfl-topology: <message>`, on stderr, nothing on stdout, and exits 2; a researcher scripting
sweeps can grep that line instead of reading a traceback.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click
import numpy as np
import yaml

from topologies.errors import TopologyError
from topologies.generators import ALIASES, GENERATORS, REPAIRS
from topologies.loader import load_topology, resolve_topology_path
from topologies.measures import algebraic_connectivity, slem, spectral_gap
from topologies.mixing import mixing_matrix
from topologies.model import Topology
from topologies.writer import dump_topology, write_topology

PROG = "dfl-topology"


class _OneLineErrors(click.Group):
    """A click group whose usage and topology errors become one stderr line and exit 2."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> NoReturn:
        try:
            rv = super().main(args, prog_name or PROG, complete_var, standalone_mode=False,
                              **extra)
        except click.exceptions.Abort:
            click.echo(f"{PROG}: interrupted", err=True)
            sys.exit(130)
        except (click.ClickException, TopologyError) as exc:
            text = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
            click.echo(f"{PROG}: {' '.join(text.split())}", err=True)
            sys.exit(2)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=_OneLineErrors)
def main() -> None:
    """Generate, validate and inspect dfl-mesh topology files."""


def _flag(param: str) -> str:
    return "-n" if param == "n" else "--" + param.replace("_", "-")


@main.command()
@click.argument("kind", type=click.Choice([*GENERATORS, *ALIASES]))
@click.option("-n", "n", type=int, help="number of nodes")
@click.option("--p", type=float, help="edge (erdos-renyi) or rewiring (watts-strogatz) prob.")
@click.option(
    "--radius", type=float, help="random-geometric link radius (start radius with --grow)"
)
@click.option("--grow", is_flag=True, default=None, help="grow the radius until connected")
@click.option("--grow-step", type=float, help="radius increment for --grow (default 0.01)")
@click.option("--dim", type=int, help="random-geometric dimension, 2 or 3 (default 2)")
@click.option("--side", type=float, help="random-geometric area side (default 1)")
@click.option("--edges", type=int, help="rejection-sample until exactly this many edges")
@click.option("--diameter", type=int, help="rejection-sample until exactly this diameter")
@click.option("--m", type=int, help="barabasi-albert links per new node")
@click.option("--k", type=int, help="watts-strogatz ring neighbours (networkx uses k // 2 a side)")
@click.option("--rows", type=int, help="grid/torus rows")
@click.option("--cols", type=int, help="grid/torus columns")
@click.option("--seed", type=int, help="random seed (default 0)")
@click.option("--repair", type=click.Choice(REPAIRS), help="fix a disconnected draw")
@click.option("--max-tries", type=int, help="give up after this many draws")
@click.option("--name", help="topology name (default: the output file's stem, else KIND)")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path))
def generate(kind: str, name: str | None, output: Path | None, **options: Any) -> None:
    """Generate a KIND topology; write it to -o FILE (else print the YAML)."""
    kind = ALIASES.get(kind, kind)
    generator = GENERATORS[kind]
    given = {k: v for k, v in options.items() if v is not None}
    accepted = inspect.signature(generator).parameters
    takes = " ".join(_flag(p) for p in accepted)
    for param in given:
        if param not in accepted:
            raise TopologyError(f"generate {kind}: {_flag(param)} does not apply (takes {takes})")
    for param, spec in accepted.items():
        if spec.default is inspect.Parameter.empty and param not in given:
            raise TopologyError(f"generate {kind}: missing {_flag(param)}")
    topology = generator(**given)
    topology = dataclasses.replace(topology, name=name or (output.stem if output else kind))
    # The header repeats the command, options in signature order, so the file says how it was made.
    args = [
        _flag(k) if given[k] is True else f"{_flag(k)} {given[k]}" for k in accepted if k in given
    ]
    command = " ".join([PROG, "generate", kind, *args])
    header = f"Generated by: {command}"
    if output is None:
        click.echo(dump_topology(topology, header), nl=False)
        return
    try:
        write_topology(topology, output, header)
    except OSError as exc:
        raise TopologyError(f"{output}: cannot write: {exc.strerror or exc}") from None
    click.echo(
        f"wrote {output}: {len(topology.nodes)} nodes, {len(topology.edges)} edges,"
        f" diameter {topology.diameter()}"
    )


def describe(topology: Topology) -> dict[str, Any]:
    """The numbers `show` prints: size, degrees, diameter and spectral quantities."""
    adj = topology.adjacency()
    degree = adj.sum(axis=1)
    w = mixing_matrix(topology, "metropolis")
    return {
        "name": topology.name,
        "nodes": len(topology.nodes),
        "edges": len(topology.edges),
        "degree": {
            "min": int(degree.min()),
            "mean": float(np.mean(degree)),
            "max": int(degree.max()),
        },
        "diameter": topology.diameter(),
        "algebraic_connectivity": algebraic_connectivity(adj),
        "metropolis": {"slem": slem(w), "spectral_gap": spectral_gap(w)},
        "generator": topology.generator,
        "directed": topology.directed,
        "schedule": topology.schedule.to_dict() if topology.schedule else None,
    }


@main.command()
@click.argument("topology")
@click.option("--json", "as_json", is_flag=True, help="print the summary as one JSON object")
def show(topology: str, as_json: bool) -> None:
    """Validate TOPOLOGY (a file or a shipped name such as ring20) and summarise it."""
    path = resolve_topology_path(topology)
    info = describe(load_topology(path))
    if as_json:
        click.echo(json.dumps({"file": str(path), **info}, sort_keys=False))
        return
    deg, mh = info["degree"], info["metropolis"]
    generator = info["generator"]
    lines = [
        f"name: {info['name']}",
        f"file: {path}",
        f"nodes: {info['nodes']}",
        f"edges: {info['edges']}",
        f"degree: min {deg['min']}, mean {deg['mean']:.4g}, max {deg['max']}",
        f"diameter: {info['diameter']}",
        f"algebraic connectivity: {info['algebraic_connectivity']:.6g}",
        f"metropolis: slem {mh['slem']:.6g}, spectral gap {mh['spectral_gap']:.6g}",
        "generator: "
        + (
            "none"
            if generator is None
            else yaml.safe_dump(
                generator, default_flow_style=True, sort_keys=False, width=10**9
            ).strip()
        ),
    ]
    if info["directed"] or info["schedule"]:
        kind = info["schedule"]["kind"] if info["schedule"] else "none"
        lines.insert(4, f"directed: {'yes' if info['directed'] else 'no'}, schedule: {kind}"
                        " (edges: the union of every round's arcs)")
    click.echo("\n".join(lines))


if __name__ == "__main__":
    main()
