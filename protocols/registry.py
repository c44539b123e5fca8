"""CLI protocol names -> their specs, from the `dfl_mesh.protocols` entry points.

The shipped protocols register exactly as a third-party package does (pyproject.toml's
[project.entry-points."dfl_mesh.protocols"]), so an installed package adds an algorithm with no edit
to this repository. The launcher reaches every protocol through this table: what it shows of each
(protocols/describe.py) is read from the specs here (protocols/declaration.py: `ProtocolDeclaration`
objects, which import no torch); a node gets its class with `node_class`. A package may register a
ProtocolNode class under `dfl_mesh.protocols` alone: its `spec` is then the entry. The order is
`dfl-report`'s: dfl-mesh's own in their declared order (families in the order of their first
member), then other packages' by name.

A name two packages register is refused, not resolved by install order: it stays out of the
table and `--protocol` with it names both packages.

The table is loaded on its first use, not on import: a node, or a host's server forking nodes,
needs one protocol (`protocol_spec`), and loading all of them cost each such process about
0.35 CPU-seconds (DSC's models, SSD-FL's clustering and networkx) for classes it never uses.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from dfl_config.plugins import (
    NODES_GROUP,
    PROTOCOLS_GROUP,
    PluginLoadError,
    Plugins,
    discover,
    discover_one,
)
from protocols.declaration import ProtocolDeclaration
from protocols.describe import DatasetPreparer, ReportTable, Score
from protocols.given import given_class

if TYPE_CHECKING:
    import click

    from protocols.node_base import ProtocolNode

GROUP = PROTOCOLS_GROUP


Declaration = ProtocolDeclaration[Any]


@cache
def _discover() -> tuple[dict[str, Declaration], Plugins]:
    plugins = discover(GROUP)
    table = {}
    for name, found in list(plugins.found.items()):
        spec = spec_of(found)
        if spec is None:
            plugins.refuse(name, NOT_A_SPEC)
        else:
            table[name] = spec
    order = sorted(table, key=lambda n: _rank(n, table))
    return {name: table[name] for name in order}, plugins


NOT_A_SPEC = ("is neither a protocols.declaration.ProtocolDeclaration nor a class with one as "
              "its `spec`")


def spec_of(found: object) -> Declaration | None:
    """The declaration an entry point names: a spec, or a (ProtocolNode) class's `spec`."""
    if isinstance(found, type):
        found = getattr(found, "spec", None)
    return found if isinstance(found, ProtocolDeclaration) else None


def _rank(name: str, table: dict[str, Declaration]) -> tuple[int, str, int, str]:
    """dfl-report's order: by family table (its position), then its rows, then by name."""
    family = table[name].report_family
    lead = table.get(family) if family else None
    report = lead.report_table if lead is not None else None
    if family is None or report is None:
        return (1 << 30, name, 0, name)
    row = report.rows.index(name) if name in report.rows else len(report.rows)
    return (report.position, family, row, name)


class Table(Mapping[str, Declaration]):
    """Every registered protocol's spec by name, in dfl-report's order, loaded on first use.
    A class handed over as an object (protocols/given.py) is found by its name too, but is no
    registered protocol: iterating lists only those."""

    def __getitem__(self, name: str) -> Declaration:
        given = given_class(name)
        if given is not None:
            return given.spec
        return _discover()[0][name]

    def __iter__(self) -> Iterator[str]:
        return iter(_discover()[0])

    def __len__(self) -> int:
        return len(_discover()[0])


PROTOCOLS = Table()


def protocol_spec(name: str) -> Declaration:
    """`name`'s spec; until the whole table is needed, only its own entry point is loaded."""
    given = given_class(name)
    if given is not None:
        return given.spec
    if _discover.cache_info().currsize == 0:
        found = _one(name)
        if found is not None:
            return found
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise KeyError(unknown_protocol(name)) from None


@cache
def _one(name: str) -> Declaration | None:
    """`name`'s entry point alone, loaded and checked once per process (None: the whole
    table is needed, to say why `name` is not there)."""
    try:
        found = discover_one(GROUP, name)
    except PluginLoadError:
        return None
    return spec_of(found[0]) if found is not None else None


def node_class(name: str) -> type[ProtocolNode]:
    """`name`'s node class, which a node runs: a class handed over as an object
    (protocols/given.py), its `dfl_mesh.protocol_nodes` entry point, or the ProtocolNode class
    registered under `dfl_mesh.protocols` alone, imported here (and torch with it)."""
    return given_class(name) or registered_node_class(name)


@cache
def registered_node_class(name: str) -> type[ProtocolNode]:
    """`name`'s node class by its entry point. Its `spec` must be the table's, and it must have
    every duty of the spec's capabilities (protocols/capabilities.py). Once per process: an
    inproc mesh's nodes are threads of one process, and each scan of the installed
    distributions' entry points costs tens of milliseconds."""
    from protocols.node_base import ProtocolNode

    spec = protocol_spec(name)
    found = discover_one(NODES_GROUP, name) or discover_one(GROUP, name)
    if found is None or not isinstance(found[0], type):
        raise TypeError(f"protocol {name!r}: no {NODES_GROUP} entry point names its node class")
    cls, package = found
    if not issubclass(cls, ProtocolNode):
        raise TypeError(f"entry point {name!r} of {package} is not a "
                        "protocols.node_base.ProtocolNode subclass")
    problem = node_problem(cls, spec)
    if problem:
        raise TypeError(f"{NODES_GROUP} entry point {name!r} of {package}: {problem}")
    return cls


def node_problem(cls: type, spec: Declaration) -> str | None:
    """Why `cls` cannot be `spec`'s node class: it names another spec, or it lacks a method
    that a declared capability needs of the node (protocols/capabilities.py)."""
    if getattr(cls, "spec", None) is not spec:
        return f"{cls.__name__} does not name the registered spec as its `spec`"
    missing = [duty for part in spec.capabilities for duty in part.duties
               if not callable(getattr(cls, duty, None))]
    if missing:
        return f"{cls.__name__} lacks {', '.join(missing)}, which its spec's capabilities need"
    return None


def protocol_plugins() -> Plugins:
    """The protocols group as discovered: what loaded, what clashed, what failed and why."""
    return _discover()[1]


def compressor_plugins() -> tuple[tuple[str, ...], Mapping[str, str]]:
    """The compressor parts' entry-point groups, and those of their entry points left out
    (`group:name` -> why, naming the package)."""
    from protocols.toolkit.compressor_configs import QUANTIZER_GROUP, REGISTERED, SPARSIFIER_GROUP

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
    for name, spec in PROTOCOLS.items():
        if spec.report_family is not None:
            members.setdefault(spec.report_family, []).append(name)
    out = {}
    for family, names in members.items():
        lead = PROTOCOLS[family]
        if lead.report_table is None:
            raise TypeError(f"protocol {family!r} leads its report family but declares "
                            "no report_table")
        out[family] = ReportFamily(family, lead.report_table, lead.score, tuple(names))
    return out


def launch_commands() -> list[click.Command]:
    """The `dfl-launch` sub-commands protocols bring, each once (baselines share their lead's)."""
    out: list[click.Command] = []
    for spec in PROTOCOLS.values():
        out += [command for command in spec.launch_commands if command not in out]
    return out


def dataset_preparers() -> dict[str, DatasetPreparer]:
    """`--dataset` name -> preparer, for the datasets protocols bring."""
    return {name: prepare for spec in PROTOCOLS.values()
            for name, prepare in spec.datasets.items()}


def multitask_baselines() -> list[str]:
    """The hyper-parameters that name a baseline run: where one is, not what runs."""
    return sorted({spec.multitask.baseline for spec in PROTOCOLS.values() if spec.multitask})
