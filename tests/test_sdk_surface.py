"""The SDK is the protocols' one door to the runtime, and the one place its duties are done.

No protocol module declares a schema, charges the formula ledger or advances the clock itself
(`set_schema`, `charge_all`, `sync_step` are called under protocols/ only inside
protocols/sdk/: the shapes of tests/test_sdk_shapes.py do it), and no module of a protocol
family imports `dfl_node` but through `protocols.sdk`.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import protocols.sdk as sdk

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = ROOT / "protocols"
FAMILIES = ("gossip", "dmflsq", "ssdfl", "dsc", "dynamic", "toolkit")
DUTIES = {"set_schema", "charge_all", "sync_step"}


def modules(*dirs: Path) -> list[Path]:
    return sorted(p for d in dirs for p in d.rglob("*.py"))


def test_no_protocol_does_a_duty_of_the_sdk_by_hand() -> None:
    calls = [f"{path.relative_to(ROOT)}:{node.lineno} {node.func.attr}"
             for path in modules(PROTOCOLS) if PROTOCOLS / "sdk" not in path.parents
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr in DUTIES]
    assert calls == []


def test_the_families_reach_the_runtime_only_through_the_sdk() -> None:
    imports = []
    for path in modules(*(PROTOCOLS / family for family in FAMILIES)):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            imports += [f"{path.relative_to(ROOT)}: {name}" for name in names
                        if name.split(".")[0] == "dfl_node"]
    assert imports == []


def test_every_name_of_the_sdk_resolves_and_its_plan_side_needs_no_torch() -> None:
    assert sorted({*sdk._spec_side(), *sdk._node_side()}) == sorted(sdk.__all__)
    assert all(getattr(sdk, name) is not None for name in sdk.__all__)
    code = ("import sys; from protocols.sdk import Coordination, ModelConfig, RunPlan; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
