"""Fixtures shared by the suite. Helpers that tests import live in modules of their own:
tests/harness.py (runs of dfl-launch), tests/proc_util.py (processes, waiting on a state)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from launcher.cli import main as launch_main
from launcher.config.ports import PortClaims
from launcher.node_cli import main as node_main
from launcher.report_cli import main as report_main
from tests.harness import RING4
from topologies.cli import main as topology_main

ROOT = Path(__file__).resolve().parents[1]
# The data shared by every checkout of this machine: CI copies the directory "shared" next to
# the checkout.
SHARED_DATA = ROOT.parent / "shared" / "data"
CIFAR_ARCHIVE = SHARED_DATA / "cifar10-jpeg.tar.gz"

HEX6 = """\
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}, {id: 4}, {id: 5}]
edges: [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 0]]
"""


def require(present: bool, what: str) -> None:
    """Skip a test whose prerequisite is missing, except under CI=true (.ci/run sets it),
    where nothing may skip silently: there the test fails."""
    if present:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (CI=true: .ci/run must provide it)")
    pytest.skip(what)


@pytest.fixture
def cifar_archive() -> Path:
    """The CIFAR-10 archive of the shared data: skips without it, fails without it under CI."""
    require(CIFAR_ARCHIVE.is_file(), f"no CIFAR-10 archive at {CIFAR_ARCHIVE}")
    return CIFAR_ARCHIVE


@pytest.fixture
def port_claims() -> Iterator[PortClaims]:
    """Loopback ports no concurrent test or run can take (launcher/config/ports.py), released
    after the test."""
    claims = PortClaims()
    try:
        yield claims
    finally:
        claims.release()


@pytest.fixture
def ring4(tmp_path: Path) -> str:
    """A four-node ring's topology file: the smallest mesh with two neighbours each."""
    path = tmp_path / "ring4.yaml"
    path.write_text(RING4)
    return str(path)


@pytest.fixture
def hex6(tmp_path: Path) -> str:
    """A six-node ring's topology file."""
    path = tmp_path / "hex6.yaml"
    path.write_text(HEX6)
    return str(path)


ENTRY_POINTS: dict[str, Callable[[], None]] = {
    "dfl-launch": launch_main, "dfl-topology": topology_main, "dfl-node": node_main,
    "dfl-report": report_main,
}


@dataclass(frozen=True)
class Exited:
    """What a shell would see of one program run: exit code, stdout, stderr."""

    code: int
    out: str
    err: str


@pytest.fixture
def entry(monkeypatch: pytest.MonkeyPatch,
          capsys: pytest.CaptureFixture[str]) -> Callable[..., Exited]:
    """`entry("dfl-launch", *args)` runs that program's real entry point in this process with
    `args` as its argv. For what a program says and returns before any node starts (bad input
    above all): a subprocess would spend seconds importing torch to print one line.
    tests/test_bad_input.py shows that the two agree."""

    def call(prog: str, *args: str) -> Exited:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", [prog, *args])
        try:
            ENTRY_POINTS[prog]()
            code: object = 0
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return Exited(0 if code is None else int(code) if isinstance(code, int) else 1, out, err)

    return call


# A slow test's bound on hangs (pyproject.toml's `timeout` is the default suite's); one that
# needs more says so with @pytest.mark.timeout.
SLOW_TIMEOUT_S = 1800


def pytest_itemcollected(item: pytest.Item) -> None:
    if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
        item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
