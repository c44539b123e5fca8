"""One exception base for the project (dfl_config/errors.py): every exception class a module of
the project defines derives from `DflMeshError`, beside the built-in base it already had.

The classes are found by importing every module of every package and asking Python which
classes are exceptions, so a new one that forgets the base fails here, whatever its name.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from dfl_config.errors import DflMeshError
from dfl_node.plan import PlanError
from launcher.errors import LaunchError

PACKAGES = ("dfl_config", "topologies", "dfl_node", "protocols", "launcher", "dfl_mesh", "bench")


def project_modules() -> list[str]:
    names = []
    for package in PACKAGES:
        names.append(package)
        found = pkgutil.walk_packages(importlib.import_module(package).__path__, package + ".")
        names += [m.name for m in found if m.name.rsplit(".", 1)[-1] != "__main__"]
    return names


def project_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined (not merely imported) in a project module."""
    found = {}
    for name in project_modules():
        module = importlib.import_module(name)
        for cls in vars(module).values():
            if (inspect.isclass(cls) and issubclass(cls, BaseException)
                    and cls.__module__ == name):
                found[f"{name}.{cls.__qualname__}"] = cls
    return found


def test_every_project_exception_derives_from_the_one_base() -> None:
    found = project_exceptions()
    assert len(found) >= 20, sorted(found)  # the walk reached the packages' modules
    # Interruptions (a KeyboardInterrupt or SystemExit) stay outside Exception: an
    # `except Exception` must not swallow a Ctrl-C or an exit.
    errors = {n: c for n, c in found.items() if issubclass(c, Exception)}
    assert sorted(n for n, c in errors.items() if not issubclass(c, DflMeshError)) == []
    assert all(not issubclass(c, DflMeshError) for c in found.values() if c not in errors.values())


def test_each_keeps_its_built_in_base() -> None:
    """`except ValueError` around a plan check still catches it, and a project error raised
    inside another library's code is still told apart from that library's own."""
    assert issubclass(PlanError, ValueError) and issubclass(PlanError, DflMeshError)
    assert not issubclass(DflMeshError, ValueError)
    try:
        raise LaunchError("x")
    except DflMeshError as caught:
        assert str(caught) == "x"
