"""bench/catalogue.py: every case of the hostile catalogue names tests that exist, and its
verdicts are read off a pytest report as the docstring there says."""

from __future__ import annotations

import ast
from pathlib import Path

from bench.catalogue import CASES, outcomes, verdict

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [path.read_text(encoding="utf-8") for path in (ROOT / "tests").glob("*.py")]


def functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def test_the_catalogue_has_42_cases_23_of_which_passed_on_7984ed7() -> None:
    assert len(CASES) == 42 and sum(case.before for case in CASES) == 23
    assert len({case.what for case in CASES}) == 42


def test_every_named_test_exists() -> None:
    """A renamed test would silently drop its case to FAIL; here it fails loudly instead. A
    parameter id must appear as a literal in the tests (its file, or the module it takes its
    parameters from)."""
    for case in CASES:
        assert case.tests, case.what
        for test in case.tests:
            file, _, rest = test.partition("::")
            path = ROOT / file
            assert path.is_file(), test
            if not rest:
                continue
            name, _, param = rest.partition("[")
            assert name in functions(path), test
            if param:
                literal = f'"{param.removesuffix("]")}"'
                assert any(literal in source for source in SOURCES), test


REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_x[one]" time="0.1"/>
<testcase classname="tests.test_a" name="test_x[two]" time="0.1"><failure message="no"/>
</testcase>
<testcase classname="tests.test_a" name="test_y" time="0.1"/>
<testcase classname="tests.test_b" name="test_z" time="0.1"><skipped message="s"/></testcase>
</testsuite></testsuites>
"""


def test_a_case_passes_only_when_every_test_it_names_ran_and_passed(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    report.write_text(REPORT)
    results = outcomes(report)
    assert results == {"tests/test_a.py::test_x[one]": True, "tests/test_a.py::test_x[two]": False,
                       "tests/test_a.py::test_y": True, "tests/test_b.py::test_z": False}

    def case(*tests: str) -> bool:
        return verdict(CASES[0].__class__("c", True, tests), results)

    assert case("tests/test_a.py::test_x[one]", "tests/test_a.py::test_y")
    assert not case("tests/test_a.py::test_x")  # all its parameters, one of which failed
    assert not case("tests/test_a.py")  # a whole file
    assert not case("tests/test_b.py::test_z")  # skipped is not passed
    assert not case("tests/test_c.py::test_never_ran")
