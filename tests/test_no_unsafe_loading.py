"""No path a peer's message or a run file can reach deserialises code.

Scans the shipped packages' syntax trees for pickle and friends, torch.load, eval/exec, dynamic
imports and unsafe YAML loading. A hit fails the test with file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dfl_config", "dfl_node", "launcher", "protocols", "topologies", "bench")
BANNED_MODULES = {
    "pickle",
    "cPickle",
    "_pickle",
    "dill",
    "cloudpickle",
    "shelve",
    "marshal",
    "joblib",
}
BANNED_CALLS = {"eval", "exec", "__import__", "compile", "import_module"}
BANNED_ATTRS = {
    ("torch", "load"),
    ("yaml", "load"),
    ("yaml", "unsafe_load"),
    ("yaml", "full_load"),
    ("pickle", "loads"),
    ("importlib", "import_module"),
}
# numpy's loaders are safe unless told to unpickle.
PICKLING_KEYWORDS = {"allow_pickle"}


def python_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


SAFE_LOADERS = ("yaml.SafeLoader", "yaml.CSafeLoader")  # pure Python, and libyaml's


def safe_loaders(tree: ast.Module) -> set[str]:
    """Classes of the module that subclass yaml.SafeLoader or yaml.CSafeLoader (they build no
    Python objects)."""
    return {
        cls.name
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef)
        and any(ast.unparse(base) in SAFE_LOADERS for base in cls.bases)
    }


def safe_yaml_load(call: ast.Call, loaders: set[str]) -> bool:
    """`yaml.load(text, Loader=X)` where X is a SafeLoader subclass of the same module."""
    return ast.unparse(call.func) == "yaml.load" and any(
        kw.arg == "Loader" and isinstance(kw.value, ast.Name) and kw.value.id in loaders
        for kw in call.keywords
    )


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        where = f"{path}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            out += [
                f"{where} imports {a.name}"
                for a in node.names
                if a.name.split(".")[0] in BANNED_MODULES
            ]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in BANNED_MODULES:
                out.append(f"{where} imports from {node.module}")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in BANNED_CALLS:
                out.append(f"{where} calls {func.id}()")
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and (func.value.id, func.attr) in BANNED_ATTRS
                and not safe_yaml_load(node, safe_loaders(tree))
            ):
                out.append(f"{where} calls {func.value.id}.{func.attr}()")
            for kw in node.keywords:
                if kw.arg in PICKLING_KEYWORDS and not (
                        isinstance(kw.value, ast.Constant) and kw.value.value is False):
                    out.append(f"{where} passes {kw.arg}")
    return out


def test_the_scan_sees_the_packages() -> None:
    files = python_files()
    assert len(files) > 20
    assert ROOT / "dfl_node" / "wire" / "codec.py" in files  # sub-packages are scanned too


@pytest.mark.parametrize(
    "snippet",
    [
        "import pickle",
        "from pickle import loads",
        "torch.load(f)",
        "eval(x)",
        "yaml.load(s)",
        "importlib.import_module(x)",
        "np.load(f, allow_pickle=True)",
        "class L(yaml.Loader): pass\nyaml.load(s, Loader=L)",
    ],
)
def test_the_scan_catches_each_pattern(tmp_path: Path, snippet: str) -> None:
    path = tmp_path / "probe.py"
    path.write_text(snippet + "\n")
    assert violations(path), snippet


def test_the_scan_lets_a_safe_loader_subclass_pass(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text("class L(yaml.SafeLoader): pass\nyaml.load(s, Loader=L)\n")
    assert violations(path) == []


def test_no_unsafe_deserialisation_anywhere() -> None:
    found = [v for p in python_files() for v in violations(p)]
    assert found == []
