"""The suite's own hygiene: no test waits by sleeping, and no test bounds elapsed wall time.

A sleep that synchronises is a guess at how long something takes, and an assertion on elapsed
time is a guess at how loaded the machine is: both pass on an idle box and fail on a busy one.
Tests wait for an event or a state instead (`dfl_mesh.testing.processes.wait_for`, `Event.wait`,
a zmq poll), and count rounds or heartbeats instead of seconds. A sleep that is the scenario
itself (a node that starts late) is listed in ALLOWED with its reason, and every entry there must
still match a sleep, so the list stays true. An assertion on elapsed time has no exception.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
# The exactness kit (dfl_mesh.testing) is test code too: plugin authors' tests wait through it.
KIT = ROOT / "dfl_mesh" / "testing"

# "path::function" (the path from the repository root, the function's dotted name within the
# module, "<module>" for module level) -> why that function may sleep.
ALLOWED: dict[str, str] = {
    "dfl_mesh/testing/processes.py::poll": (
        "the suite's (and the exactness kit's) one polling wait, under wait_for and wait_gone: "
        "it looks at a state that nothing signals (another process's, a file's) every tenth of "
        "a second, and its caller fails the test when the deadline passes"
    ),
    "tests/test_rendezvous.py::start.body": (
        "lateness is the scenario, not a synchronisation: a node starts five receive timeouts "
        "after the others; load can only make it later, and the test times nothing"
    ),
    "tests/test_multihost_netns.py::run_mesh": (
        "a staggered start in random order is the scenario: the nodes of a real mesh do not "
        "start together; no outcome depends on how long the delays last"
    ),
    "tests/test_report_html.py::visit": (
        "a grace period for what the page might start after its load event (there is no event "
        "for 'nothing more will happen'); a slow machine can only make the page look cleaner"
    ),
}

CLOCKS = frozenset({
    "monotonic", "monotonic_ns", "time", "time_ns", "perf_counter", "perf_counter_ns",
})
SLEEPS = {"time": "sleep", "asyncio": "sleep"}
# Names, attributes and subscript keys that hold a wall-clock duration.
TIME_WORDS = ("wall_seconds", "wall_s", "elapsed", "duration", "took")
# Calls whose result is arithmetic on, or a test of, their arguments.
ARITHMETIC = frozenset({"abs", "round", "float", "int", "min", "max", "sum", "approx", "isclose",
                        "all", "any", "sorted", "list", "tuple", "set"})


def _imports(tree: ast.Module) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """(local name -> module, for `import time [as t]`;
    local name -> (module, function), for `from time import sleep [as nap]`)."""
    modules: dict[str, str] = {}
    functions: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in SLEEPS:
                    modules[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module in SLEEPS and node.level == 0:
            for alias in node.names:
                functions[alias.asname or alias.name] = (node.module, alias.name)
    return modules, functions


def _called(call: ast.Call, modules: dict[str, str],
            functions: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    """(module, function) of a call to something of time's or asyncio's, else None."""
    func = call.func
    if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id in modules):
        return modules[func.value.id], func.attr
    if isinstance(func, ast.Name) and func.id in functions:
        return functions[func.id]
    return None


def _time_word(text: str) -> bool:
    text = text.lower()
    return any(word in text for word in TIME_WORDS)


class _Scopes(ast.NodeVisitor):
    """Every function's (and the module's) own statements, by dotted name."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.bodies: dict[str, list[ast.AST]] = {"<module>": []}

    def scope(self) -> str:
        return ".".join(self.stack) or "<module>"

    def generic_visit(self, node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.stack.append(child.name)
                self.bodies.setdefault(self.scope(), [])
                self.generic_visit(child)
                self.stack.pop()
            else:
                self.bodies[self.scope()].append(child)
                self.generic_visit(child)


def _own_nodes(tree: ast.Module) -> dict[str, list[ast.AST]]:
    scopes = _Scopes()
    scopes.generic_visit(tree)
    return scopes.bodies


def _targets(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from _targets(element)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)


def _name(func: ast.AST) -> str:
    """The called function's own name: `f` of `f(...)` and of `a.b.f(...)`."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _timed(expr: ast.AST, tainted: set[str], modules: dict[str, str],
           functions: dict[str, tuple[str, str]]) -> bool:
    """Does `expr` involve a clock reading, a name derived from one, or a duration by name?
    A call's arguments count only for arithmetic (`round(time.time() - t0, 1)`): what a
    function computes from a deadline given to it (a reply, a process) is no duration."""
    if isinstance(expr, ast.Call):
        called = _called(expr, modules, functions)
        if called is not None and called[0] == "time" and called[1] in CLOCKS:
            return True
        parts: list[ast.AST] = [expr.func]
        if _name(expr.func) in ARITHMETIC:
            parts += [*expr.args, *(keyword.value for keyword in expr.keywords)]
        return any(_timed(part, tainted, modules, functions) for part in parts)
    if isinstance(expr, ast.Name):
        return expr.id in tainted or _time_word(expr.id)
    if isinstance(expr, ast.Attribute) and _time_word(expr.attr):
        return True
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) and \
            isinstance(expr.slice.value, str) and _time_word(expr.slice.value):
        return True
    if isinstance(expr, ast.Lambda):
        return False
    return any(_timed(child, tainted, modules, functions) for child in ast.iter_child_nodes(expr))


def _violations(source: str, path: str) -> Iterator[tuple[str, int, str]]:
    """(path::function, line, what) for every sleep and every assertion on elapsed time."""
    tree = ast.parse(source, path)
    modules, functions = _imports(tree)
    for scope, nodes in _own_nodes(tree).items():
        key = f"{path}::{scope}"
        everything = nodes  # every node of its own, none of a nested function's
        for node in everything:
            if isinstance(node, ast.Call) and _called(node, modules, functions) in (
                    ("time", "sleep"), ("asyncio", "sleep")):
                yield key, node.lineno, "sleeps"
        # Dataflow within the function: a name assigned from a timed expression is timed,
        # to a fixed point (loops assign after use).
        tainted: set[str] = set()
        while True:
            before = len(tainted)
            for node in everything:
                if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
                    value = node.value
                    if value is None or not _timed(value, tainted, modules, functions):
                        continue
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        tainted.update(_targets(target))
                elif isinstance(node, (ast.For, ast.comprehension)) and _timed(
                        node.iter, tainted, modules, functions):
                    tainted.update(_targets(node.target))
            if len(tainted) == before:
                break
        for node in everything:
            if isinstance(node, ast.Assert):
                checked: list[ast.AST] = [node.test]
            elif isinstance(node, ast.Call) and _name(node.func).startswith("assert"):
                # unittest's assertLess, numpy.testing's assert_allclose, ...
                checked = [*node.args, *(keyword.value for keyword in node.keywords)]
            else:
                continue
            if any(_timed(part, tainted, modules, functions) for part in checked):
                yield key, node.lineno, "asserts on elapsed time"


def _suite() -> list[tuple[str, int, str]]:
    found = []
    for file in sorted([*TESTS.rglob("*.py"), *KIT.rglob("*.py")]):
        path = file.relative_to(ROOT).as_posix()
        found.extend(_violations(file.read_text(), path))
    return found


def _unlisted_and_stale(found: list[tuple[str, int, str]],
                       allowed: dict[str, str]) -> tuple[list[str], list[str]]:
    """Violations not excused (a sleep not in `allowed`; any assertion on elapsed time), and
    entries of `allowed` that excuse no sleep."""
    unlisted = [f"{key} (line {line}) {what}" for key, line, what in found
                if key not in allowed or what != "sleeps"]
    stale = sorted(set(allowed) - {key for key, _, what in found if what == "sleeps"})
    return unlisted, stale


def test_no_test_sleeps_or_bounds_wall_time_unless_listed() -> None:
    unlisted, stale = _unlisted_and_stale(_suite(), ALLOWED)
    assert not unlisted, (
        "wait for an event or a state (tests.proc_util.wait_for) instead of sleeping (or list a "
        "sleep that is the scenario in ALLOWED, with its reason), and count rounds or heartbeats "
        "instead of seconds:\n" + "\n".join(unlisted))
    assert not stale, f"ALLOWED lists functions that no longer sleep or time anything: {stale}"
    assert all(reason.strip() for reason in ALLOWED.values()), "every entry needs its reason"


def test_an_entry_that_no_longer_matches_is_stale() -> None:
    found = list(_violations("import time\ndef test_a():\n    time.sleep(1)\n", "t.py"))
    allowed = {"t.py::test_a": "planted", "t.py::test_gone": "planted"}
    assert _unlisted_and_stale(found, allowed) == ([], ["t.py::test_gone"])
    assert _unlisted_and_stale(found, {}) == (["t.py::test_a (line 3) sleeps"], [])


def test_an_assertion_on_elapsed_time_has_no_exception() -> None:
    source = "def test_a():\n    summary = run()\n    assert summary['wall_seconds'] < 600\n"
    found = list(_violations(source, "t.py"))
    assert _unlisted_and_stale(found, {"t.py::test_a": "planted"}) == (
        ["t.py::test_a (line 3) asserts on elapsed time"], ["t.py::test_a"])


@pytest.mark.parametrize("source, key", [
    ("import time\ndef test_a():\n    time.sleep(1)\n", "t.py::test_a"),
    ("from time import sleep as nap\ndef test_a():\n    nap(0.5)\n", "t.py::test_a"),
    ("import asyncio\nasync def test_a():\n    await asyncio.sleep(0)\n", "t.py::test_a"),
    ("import time as t\nclass TestA:\n    def test_b(self):\n        t.sleep(1)\n",
     "t.py::TestA.test_b"),
    ("import time\ntime.sleep(1)\n", "t.py::<module>"),
])
def test_the_detector_finds_a_planted_sleep(source: str, key: str) -> None:
    assert [(k, what) for k, _, what in _violations(source, "t.py")] == [(key, "sleeps")]


@pytest.mark.parametrize("body", [
    # The clock read directly in the assertion.
    "start = time.monotonic()\n    run()\n    assert time.monotonic() - start < 1.5",
    # Through names assigned from it, in any order and through several steps.
    "t0 = time.perf_counter()\n    run()\n    took = time.perf_counter() - t0\n"
    "    spent = round(took, 1)\n    assert spent == pytest.approx(0.3, abs=0.1)",
    "from time import monotonic\n    a = monotonic()\n    for _ in range(3):\n"
    "        b = a + 1\n    assert b < 2",
    "began = time.time()\n    assert 0.3 <= (time.time() - began) < 1.5, 'too slow'",
    # A duration by name: a summary's key, an attribute, a variable.
    "summary = run()\n    assert summary['wall_seconds'] < 600",
    "result = run()\n    assert result.elapsed < 30",
    "wall_s = run()\n    assert wall_s < 30",
    "duration = run()[1]\n    assert all(d < 5 for d in [duration])",
    # Not only the assert statement.
    "t0 = time.monotonic()\n    run()\n    self.assertLess(time.monotonic() - t0, 1.0)",
    "took = run()\n    numpy.testing.assert_allclose(took, 0.3, atol=0.1)",
])
def test_the_detector_finds_a_planted_wall_clock_assertion(body: str) -> None:
    source = f"import time\nimport pytest\ndef test_a():\n    {body}\n"
    found = [(k, what) for k, _, what in _violations(source, "t.py")]
    assert found == [("t.py::test_a", "asserts on elapsed time")]


def test_the_detector_leaves_clean_code_alone() -> None:
    source = (
        "import time\nimport threading\n"
        "def test_a():\n    done = threading.Event()\n    assert done.wait(5)\n"
        "    rounds = run()\n    assert rounds['completed'] == 3\n"
        "def helper():\n    deadline = time.monotonic() + 5\n"
        "    if time.monotonic() > deadline:\n        raise TimeoutError\n"
    )
    assert list(_violations(source, "t.py")) == []
