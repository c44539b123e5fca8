"""CLI protocol names -> their specs, from the `dfl_mesh.protocols` entry points.

The shipped protocols register exactly as a third-party package does (pyproject.toml's
[project.entry-points."dfl_mesh.protocols"]), so an installed package adds an algorithm with no
edit to this repository. The launcher reaches every protocol through this table: what it shows
of each (protocols/describe.py) is read from the specs here (protocols/spec.py), which import
no torch; a node gets its class with `node_class`. The order is `dfl-report`'s:
dfl-mesh's own in their declared order (families in the order of their first member), then
other packages' by name.

A name two packages register is refused, not resolved by install order: it stays out of the
table and `--protocol` with it names both packages.

The table is loaded on its first use, not on import: a node, or a host's server forking nodes,
needs one protocol (`protocol_class`), and loading all of them cost each such process about
0.35 CPU-seconds (DSC's models, SSD-FL's clustering and networkx) for classes it never uses.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, TypeGuard

from dfl_config.plugins import (
    NODES_GROUP,
    PROTOCOLS_GROUP,
    PluginLoadError,
    Plugins,
    discover,
    discover_one,
)
from protocols.describe import DatasetPreparer, ReportTable, Score
from protocols.spec import ProtocolSpec

if TYPE_CHECKING:
    import click

    from protocols.base import Protocol

GROUP = PROTOCOLS_GROUP


@cache
def _discover() -> tuple[dict[str, type[ProtocolSpec]], Plugins]:
    plugins = discover(GROUP)
    for name, cls in list(plugins.found.items()):
        if not is_spec(cls):
            plugins.refuse(name, NOT_A_SPEC)
    table = plugins.found
    order = sorted(table, key=lambda n: _rank(n, table))
    return {name: table[name] for name in order}, plugins


NOT_A_SPEC = "is not a protocols.spec.ProtocolSpec subclass"


def is_spec(cls: object) -> TypeGuard[type[ProtocolSpec]]:
    return isinstance(cls, type) and issubclass(cls, ProtocolSpec)


def _rank(name: str, table: dict[str, type[ProtocolSpec]]) -> tuple[int, str, int, str]:
    """dfl-report's order: by family table (its position), then its rows, then by name."""
    family = table[name].report_family
    lead = table.get(family) if family else None
    report = lead.report_table if lead is not None else None
    if family is None or report is None:
        return (1 << 30, name, 0, name)
    row = report.rows.index(name) if name in report.rows else len(report.rows)
    return (report.position, family, row, name)


class Table(Mapping[str, type[ProtocolSpec]]):
    """Every registered protocol's spec by name, in dfl-report's order, loaded on first use."""

    def __getitem__(self, name: str) -> type[ProtocolSpec]:
        return _discover()[0][name]

    def __iter__(self) -> Iterator[str]:
        return iter(_discover()[0])

    def __len__(self) -> int:
        return len(_discover()[0])


PROTOCOLS = Table()


def protocol_class(name: str) -> type[ProtocolSpec]:
    """`name`'s spec; until the whole table is needed, only its own entry point is loaded."""
    if _discover.cache_info().currsize == 0:
        found = _one(name)
        if found is not None:
            return found
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise KeyError(unknown_protocol(name)) from None


@cache
def _one(name: str) -> type[ProtocolSpec] | None:
    """`name`'s entry point alone, loaded and checked once per process (None: the whole
    table is needed, to say why `name` is not there)."""
    try:
        found = discover_one(GROUP, name)
    except PluginLoadError:
        return None
    return found[0] if found is not None and is_spec(found[0]) else None


@cache
def node_class(name: str) -> type[Protocol]:
    """`name`'s node class, which a node runs: its `dfl_mesh.protocol_nodes` entry point, a
    subclass of its spec, imported here (and torch with it); a spec that is a Protocol class
    itself is its own. Once per process: an inproc mesh's nodes are threads of one process,
    and each scan of the installed distributions' entry points costs tens of milliseconds."""
    from protocols.base import Protocol

    spec = protocol_class(name)
    if issubclass(spec, Protocol):
        return spec
    found = discover_one(NODES_GROUP, name)
    if found is None:
        raise TypeError(f"protocol {name!r}: no {NODES_GROUP} entry point names its node class")
    cls, package = found
    if not (isinstance(cls, type) and issubclass(cls, spec) and issubclass(cls, Protocol)):
        raise TypeError(f"{NODES_GROUP} entry point {name!r} of {package} is not a "
                        f"protocols.base.Protocol subclass of {spec.__name__}")
    return cls


def protocol_plugins() -> Plugins:
    """The protocols group as discovered: what loaded, what clashed, what failed and why."""
    return _discover()[1]


def compressor_plugins() -> tuple[tuple[str, ...], Mapping[str, str]]:
    """The compressor parts' entry-point groups, and those of their entry points left out
    (`group:name` -> why, naming the package)."""
    from protocols.toolkit.compressor_specs import QUANTIZER_GROUP, REGISTERED, SPARSIFIER_GROUP

    return (SPARSIFIER_GROUP, QUANTIZER_GROUP), REGISTERED.failed


def unknown_protocol(name: str) -> str:
    """Why `name` is no protocol, in one line."""
    return _discover()[1].why_not(name, "protocol")


@dataclass(frozen=True)
class ReportFamily:
    """One table of `dfl-report`: the protocols it compares, in row order."""

    name: str
    table: ReportTable
    score: Score  # the lead protocol's
    members: tuple[str, ...]


def report_families() -> dict[str, ReportFamily]:
    """Every family, in table order; a protocol without a family is in none."""
    members: dict[str, list[str]] = {}
    for name, cls in PROTOCOLS.items():
        if cls.report_family is not None:
            members.setdefault(cls.report_family, []).append(name)
    out = {}
    for family, names in members.items():
        lead = PROTOCOLS[family]
        if lead.report_table is None:
            raise TypeError(f"{lead.__name__} leads the report family {family!r} but declares "
                            "no report_table")
        out[family] = ReportFamily(family, lead.report_table, lead.score, tuple(names))
    return out


def launch_commands() -> list[click.Command]:
    """The `dfl-launch` sub-commands protocols bring, each once (subclasses inherit them)."""
    out: list[click.Command] = []
    for cls in PROTOCOLS.values():
        out += [command for command in cls.launch_commands if command not in out]
    return out


def dataset_preparers() -> dict[str, DatasetPreparer]:
    """`--dataset` name -> preparer, for the datasets protocols bring."""
    return {name: prepare for cls in PROTOCOLS.values() for name, prepare in cls.datasets.items()}


def multitask_baselines() -> list[str]:
    """The hyper-parameters that name a baseline run: where one is, not what runs."""
    return sorted({cls.multitask.baseline for cls in PROTOCOLS.values() if cls.multitask})
