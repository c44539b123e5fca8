"""Fixtures shared by the suite. Helpers that tests import live in modules of their own:
tests/harness.py (runs of dfl-launch), tests/proc_util.py (processes, waiting on a state)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from launcher.config.ports import PortClaims
from tests.harness import RING4, Exited, in_process

ROOT = Path(__file__).resolve().parents[1]
# Plugin packages' own tests run where their plugin is installed (tests/test_plugins.py), not
# in this suite's process.
collect_ignore = ["plugins"]
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


@pytest.fixture
def entry() -> Callable[..., Exited]:
    """`entry("dfl-launch", *args)` runs that program's real entry point in this process with
    `args` as its argv (tests/harness.py's `in_process`). For what a program says and returns
    before any node starts (bad input above all): a subprocess would spend seconds importing
    torch to print one line. tests/test_bad_input.py shows that the two agree."""
    return in_process


# A slow test's bound on hangs (pyproject.toml's `timeout` is the default suite's); one that
# needs more says so with @pytest.mark.timeout.
SLOW_TIMEOUT_S = 1800


# The test files that take longest, longest first (worker-seconds of the slow suite on 2 cores:
# 482, 425, 378, 260, 216, 102 (measured alone), 88, 87, 73, 69, 60). pytest-xdist hands whole
# files to its workers (--dist loadfile) in collection order, so these start first and the many
# short files fill in behind them, instead of a long file starting last and running alone at
# the end.
LONGEST_FIRST = ("test_resume.py", "test_reproduce.py", "test_compose_engine.py",
                 "test_dpsgd.py", "test_slurm_submit.py", "test_reproduce_slurm.py",
                 "test_multihost_netns.py", "test_secure.py", "test_dmflsq.py",
                 "test_on_failure.py", "test_hostile_run.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """LONGEST_FIRST's files first, in its order; every other file after them, as collected.
    A stable sort: each file's tests keep their order and stay together."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_itemcollected(item: pytest.Item) -> None:
    if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
        item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
