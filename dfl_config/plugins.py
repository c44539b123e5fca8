"""Entry-point discovery, one way for every plugin point (protocols, models, datasets,
compressors).

What dfl-mesh ships registers exactly as a third-party package does, in pyproject.toml, so an
installed package adds a protocol, a model, a dataset or a compressor without an edit to this
repository. A name two packages register is refused rather than resolved by install order: it
is left out of the table and reported, naming both packages, where a user asks for it.

A plugin that cannot be loaded (its import raises, or it registers the wrong kind of object) is
contained the same way: it is left out, and the one line saying why, naming its package, is
shown where its name is asked for and by `dfl-launch plugins`. Every other name still works.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import EntryPoint, EntryPoints, entry_points
from typing import Any

from dfl_config.errors import DflMeshError

HOME = "dfl-mesh"  # this project's distribution
PROTOCOLS_GROUP = "dfl_mesh.protocols"  # protocols/registry.py's: the specs
NODES_GROUP = "dfl_mesh.protocol_nodes"  # and the node classes, by the same names


@cache
def _installed() -> Any:
    """Every entry point of every installed distribution (Python 3.11: grouped, selectable by
    group as `entry_points(group=...)` selects), read once per process: each read opens every
    distribution's metadata (tens of milliseconds), and a refusal of bad input asks for five
    groups (protocols, models, datasets, sparsifiers, quantizers)."""
    return entry_points()


def group_entry_points(group: str) -> EntryPoints:
    """`importlib.metadata.entry_points(group=group)`, from the one read of them all."""
    found: EntryPoints = _installed().select(group=group)
    return found


def package_of(ep: Any) -> str:
    """The distribution that registers `ep` (an EntryPoint, or anything with its `dist`)."""
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else "(unknown package)"


@dataclass(frozen=True)
class Plugins:
    """The loaded objects of one entry-point group by name, and the names that clash."""

    group: str
    found: dict[str, Any] = field(default_factory=dict)
    clashes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    """Names whose entry point could not be loaded, or is not what the group takes: the one
    line that says why, naming the package."""

    def unavailable(self, name: str) -> bool:
        """Registered, but not usable: two packages register it, or it failed to load."""
        return name in self.clashes or name in self.failed

    def refuse(self, name: str, reason: str) -> None:
        """Take a loaded `name` out of `found`: it is not what the group takes (`reason`)."""
        self.found.pop(name, None)
        package = self.packages.get(name, "(unknown package)")
        self.failed[name] = f"{self.group} entry point {name!r} of {package} {reason}"

    def why_not(self, name: str, what: str) -> str:
        """One line: why `name` is no `what` here."""
        if name in self.failed:
            return f"{what} {name!r} is unavailable: {self.failed[name]}"
        if name in self.clashes:
            return (f"{what} {name!r} is registered by several packages "
                    f"({' and '.join(self.clashes[name])}); uninstall one of them")
        return f"unknown {what} {name!r} (known: {', '.join(sorted(self.found))})"


def discover(group: str) -> Plugins:
    """Load every entry point of `group`; one that fails is left out, its reason kept in
    `failed` (one line naming the package), so that it breaks only what names it."""
    by_name: dict[str, list[EntryPoint]] = {}
    for ep in group_entry_points(group):
        by_name.setdefault(ep.name, []).append(ep)
    plugins = Plugins(group)
    for name in sorted(by_name):
        packages = tuple(sorted({package_of(ep) for ep in by_name[name]}))
        if len(packages) > 1:
            plugins.clashes[name] = packages
            continue
        plugins.packages[name] = packages[0]
        try:
            plugins.found[name] = load(group, by_name[name][0], packages[0])
        except PluginLoadError as exc:
            plugins.failed[name] = str(exc)
    return plugins


def discover_one(group: str, name: str) -> tuple[Any, str] | None:
    """The object `name` registers in `group` and its package, loading no other entry point;
    None where no package or several register it (discover() then says which)."""
    eps = [ep for ep in group_entry_points(group) if ep.name == name]
    packages = {package_of(ep) for ep in eps}
    if len(packages) != 1:
        return None
    package = packages.pop()
    return load(group, eps[0], package), package


class PluginLoadError(TypeError, DflMeshError):
    """An entry point whose import raised: one line, naming its package and the error."""


def load(group: str, ep: EntryPoint, package: str) -> Any:
    try:
        return ep.load()
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise PluginLoadError(f"{group} entry point {ep.name!r} of {package} ({ep.value}) "
                              f"cannot be loaded: {type(exc).__name__}: {first}") from exc


def registered(group: str) -> set[str]:
    """The names `group` registers, none of them loaded: what can be checked before a
    protocol's imports (torch, for most) are paid for."""
    return {ep.name for ep in group_entry_points(group)}
