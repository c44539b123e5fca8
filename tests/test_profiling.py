"""DFL_MESH_PROFILE: the named nodes' rounds under cProfile, written into the run directory."""

from __future__ import annotations

import pstats
from pathlib import Path

import pytest

from dfl_node.runner.profiling import PROFILE_ENV, profiled


def busy_round() -> int:
    return sum(range(10_000))


def test_a_named_node_writes_its_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROFILE_ENV, "1,3")
    with profiled(3, tmp_path):
        busy_round()
    stats = pstats.Stats(str(tmp_path / "profile" / "node-3.prof")).stats  # type: ignore[attr-defined]
    assert [key for key in stats if key[2] == "busy_round"] != []


@pytest.mark.parametrize("setting", ["", "13", "0,2"])
def test_other_nodes_write_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   setting: str) -> None:
    monkeypatch.setenv(PROFILE_ENV, setting)
    with profiled(1, tmp_path):
        busy_round()
    assert not (tmp_path / "profile").exists()


def test_all_profiles_every_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROFILE_ENV, "all")
    with profiled(7, tmp_path):
        busy_round()
    assert (tmp_path / "profile" / "node-7.prof").stat().st_size > 0
