"""The house rules that import-linter cannot state: what the runtime package may hold.

The layer, family-independence and no-cycle contracts live in pyproject.toml and run as
`lint-imports` in CI; these tests check the rest of the architecture from the real import graph.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import grimp
import pytest

from protocols import sdk
from protocols.registry import PROTOCOLS, node_class

FAMILIES = ("protocols.gossip", "protocols.dmflsq", "protocols.ssdfl", "protocols.dsc",
            "protocols.dynamic")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("dfl_config", "topologies", "dfl_node", "protocols", "launcher",
                             "bench")


def family_of(module: str) -> str | None:
    return next((f for f in FAMILIES if module == f or module.startswith(f + ".")), None)


def test_every_protocol_lives_in_a_family_package() -> None:
    """A protocol's module says which paper's family it belongs to."""
    homes = {name: node_class(name).__module__ for name in PROTOCOLS}
    assert all(family_of(module) for module in homes.values()), homes


def through_the_sdk(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """dfl_node module -> the modules that import one of its names from `protocols.sdk`,
    which re-exports them (the families' one door to the runtime)."""
    users: dict[str, set[str]] = {}
    for module in graph.find_downstream_modules("protocols.sdk"):
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(Path(spec.origin).read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "protocols.sdk":
                for alias in node.names:
                    home = getattr(getattr(sdk, alias.name), "__module__", "") or ""
                    if home.startswith("dfl_node"):
                        users.setdefault(home, set()).add(module)
    return users


def test_runtime_holds_no_module_that_one_family_alone_uses(graph: grimp.ImportGraph) -> None:
    """A module of dfl_node whose every importer sits in one protocol family belongs to that
    family's package: the runtime is what several algorithms share. A name a family imports
    from `protocols.sdk` counts as an import of the runtime module it comes from."""
    single = {}
    via_sdk = through_the_sdk(graph)
    for module in sorted(graph.find_descendants("dfl_node")):
        importers = graph.find_modules_that_directly_import(module) - {"protocols.sdk"}
        importers |= via_sdk.get(module, set())
        families = {family_of(m) for m in importers}
        if importers and len(families) == 1 and None not in families:
            single[module] = families.pop()
    assert not single, single


def test_the_runtime_knows_no_protocol_and_no_launcher(graph: grimp.ImportGraph) -> None:
    """Also through chains of imports, not only direct ones (the layer contract's intent)."""
    for upper in ("protocols", "launcher", "bench"):
        assert not graph.find_shortest_chains(importer="dfl_node", imported=upper), upper
