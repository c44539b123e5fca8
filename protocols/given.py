"""ProtocolNode classes handed over as objects (`dfl_mesh.run(protocol=MyProtocol)`), by name.

A class defined in a script's `__main__` or a notebook cell has no entry point: the registry
finds it here instead, under its qualified name (`__main__.MyProtocol`), which the plan and
summary record. Nodes reach it without importing anything by name: the threads backend's
nodes share this table with the launcher, and the processes backend's nodes are forked (through
the zygote) from the launcher after the class was put here. A process that was not forked
from that launcher (`dfl-node` on a host) has an empty table and refuses the plan's protocol.
Running a cell again gives a new class under the same name: the last one handed over wins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from protocols.node_base import ProtocolNode

_GIVEN: dict[str, type[ProtocolNode]] = {}


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def give(cls: type[ProtocolNode]) -> str:
    """Make `cls` the protocol of its qualified name in this process (and in every process
    forked from it afterwards); the name."""
    name = qualified_name(cls)
    _GIVEN[name] = cls
    return name


def given_class(name: str) -> type[ProtocolNode] | None:
    """The class handed over under `name`, if any."""
    return _GIVEN.get(name)
