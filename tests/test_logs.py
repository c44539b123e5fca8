"""The loggers' one configuration per program: launcher lines read `<prog>: <message>` on
stderr, a node's lines are bare, INFO only where stdout is a log, stdout otherwise untouched."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from dfl_node.runner.context import node_logger
from launcher.logs import ROOT, SysStreamHandler, configure, launcher_logger


@pytest.fixture(autouse=True)
def unconfigured() -> Iterator[None]:
    yield
    root = logging.getLogger(ROOT)
    for handler in [h for h in root.handlers if isinstance(h, SysStreamHandler)]:
        root.removeHandler(handler)
    root.setLevel(logging.NOTSET)


def test_a_data_program_shows_warnings_on_stderr_only(capsys: pytest.CaptureFixture[str]) -> None:
    configure("dfl-report")
    launcher_logger("report").info("not shown")
    launcher_logger("report").warning("skipped (status failed): %s", "runs/x")
    node_logger(3).info("not shown either")
    node_logger(3).warning("dmfl-sq: k_psi = 1 < diam(G) = 3")
    assert capsys.readouterr() == ("", "dfl-report: skipped (status failed): runs/x\n"
                                   "dmfl-sq: k_psi = 1 < diam(G) = 3\n")


def test_a_node_program_shows_info_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    configure("dfl-node", info_on_stdout=True)
    node_logger(2).info("node %d pid %d binds %s", 2, 7, "tcp://*:5000")
    launcher_logger("node").error("pre-phase: %s", "boom")
    assert capsys.readouterr() == ("node 2 pid 7 binds tcp://*:5000\n",
                                   "dfl-node: pre-phase: boom\n")


def test_configuring_again_replaces_the_handlers(capsys: pytest.CaptureFixture[str]) -> None:
    configure("dfl-node", info_on_stdout=True)
    configure("dfl-launch")
    launcher_logger("launch").warning("node %d died", 4)
    assert capsys.readouterr() == ("", "dfl-launch: node 4 died\n")
