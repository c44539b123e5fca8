"""Faults that no node is to blame for end a run in order (slow suite): a disk that fills (a
real tmpfs), a run directory that turns read-only mid-run (a real read-only bind mount),
SIGTERM and SIGHUP to the launcher, and the zygote SIGKILLed. Each ends with the exit code
docs/failures.md promises, at most 3 lines on stderr naming the true culprit, summary.json
holding that cause (or a line saying why it could not be written), no node left running and
no temporary file left in the run directory.

The fault comes once every node has saved a checkpoint, so the run is under way. Storage
faults come while the mesh is frozen (SIGSTOP to every node, none of them half-way through a
checkpoint), so what the nodes write next meets the fault whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.harness import ENV_ROOT, ROOT
from tests.mounts import fill, read_only, tmpfs
from tests.proc_util import children, node_pids, wait_for, wait_gone

RUN = ("--protocol", "d-psgd", "--dataset", "synthetic", "--checkpoint-every", "5",
       "--quiet", "--no-plots")
# A checkpoint of this MLP (43,530 parameters) is about 190 KB: more than the 64 KB a full
# disk is left with, so no node's next checkpoint fits.
LARGE_MODEL = ("--set", "model={name: mlp, hidden: [1024]}")
LEFT_FREE = 64 << 10
MAX_STDERR_LINES = 3


def start(run: Path, topology: str, *args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "launcher.cli", "--topology", topology, *RUN,
           "--out", str(run), *args]
    return subprocess.Popen(cmd, cwd=ROOT, env=ENV_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def temporaries(run: Path) -> list[Path]:
    return sorted(run.rglob("*.tmp"))


def every_node_checkpointed(proc: subprocess.Popen[str], run: Path, nodes: int) -> None:
    def saved() -> bool:
        assert proc.poll() is None, proc.communicate()[1]
        return len(node_pids(run)) == nodes and all(
            any((run / "checkpoints" / f"node-{i}").glob("round-*.safetensors"))
            for i in range(nodes))

    wait_for(saved, 300, "a checkpoint of every node")


@contextmanager
def frozen(run: Path) -> Iterator[None]:
    """Every node stopped (SIGSTOP) with no checkpoint half written, for the block."""
    pids = list(node_pids(run).values())
    while True:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        if not temporaries(run):
            break
        for pid in pids:  # one caught mid-write: let it finish, then try again
            os.kill(pid, signal.SIGCONT)
        wait_for(lambda: not temporaries(run), 60, "a checkpoint being written to land")
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


@contextmanager
def launcher(run: Path, topology: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    proc = start(run, topology, *args)
    try:
        every_node_checkpointed(proc, run, 6)
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def ended(proc: subprocess.Popen[str], run: Path, code: int) -> list[str]:
    """The launcher's stderr lines, once it exited with `code` and left no node running."""
    pids = list(node_pids(run).values())
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == code, err
    lines = err.strip().splitlines()
    assert 1 <= len(lines) <= MAX_STDERR_LINES and "Traceback" not in err, err
    assert all(line.startswith("dfl-launch: ") for line in lines), err
    assert wait_gone(pids, 30) == [], "a node outlived the run"
    return lines


def summary(run: Path) -> dict[str, Any]:
    return json.loads((run / "summary.json").read_text())


@pytest.mark.slow
def test_a_full_disk_ends_the_run_with_its_cause_in_the_summary(tmp_path: Path,
                                                               hex6: str) -> None:
    with tmpfs(tmp_path / "disk", "64m") as disk:
        run = disk / "run"
        with launcher(run, hex6, "--rounds", "300", *LARGE_MODEL) as proc:
            with frozen(run):
                fill(disk, LEFT_FREE)
            lines = ended(proc, run, 1)
        assert "disk full (ENOSPC)" in lines[0] and "the run stopped" in lines[0]
        assert len(lines) == 1, lines  # the summary fitted in what the partial files freed
        written = summary(run)
        assert written["status"] == "failed" and written["cause"]["kind"] == "disk_full"
        assert written["cause"]["errno"] == "ENOSPC" and written["failed_node"] is None
        assert written["cause"]["message"] in lines[0]
        assert temporaries(run) == []


@pytest.mark.slow
def test_a_run_directory_turned_read_only_ends_the_run_and_says_so(tmp_path: Path,
                                                                   hex6: str) -> None:
    run = tmp_path / "run"
    with launcher(run, hex6, "--rounds", "100000") as proc, ExitStack() as mounted:
        with frozen(run):
            mounted.enter_context(read_only(run))
        lines = ended(proc, run, 1)
    assert "read-only file system (EROFS): node " in lines[0]
    assert "could not write checkpoints/node-" in lines[0]
    assert lines[1:] == ["dfl-launch: summary.json not written: Read-only file system (EROFS)"]
    assert not (run / "summary.json").exists()
    assert temporaries(run) == []


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code", "said"), [(signal.SIGTERM, 143, "terminated"),
                                                   (signal.SIGHUP, 1, "hung up")])
def test_sigterm_and_sighup_stop_the_run_in_order(tmp_path: Path, hex6: str,
                                                  sig: signal.Signals, code: int,
                                                  said: str) -> None:
    run = tmp_path / "run"
    with launcher(run, hex6, "--rounds", "100000") as proc:
        os.kill(proc.pid, sig)  # the launcher alone, as `kill` or a closing terminal sends it
        lines = ended(proc, run, code)
    assert lines == [f"dfl-launch: {said} ({sig.name}); completed evaluations kept in {run}"]
    written = summary(run)
    assert written["status"] == "interrupted"
    assert written["cause"] == {"kind": "signal", "signal": sig.name,
                                "message": f"{said} ({sig.name})"}
    assert temporaries(run) == []


@pytest.mark.slow
def test_a_killed_zygote_is_named_not_a_node(tmp_path: Path, hex6: str) -> None:
    run = tmp_path / "run"
    with launcher(run, hex6, "--rounds", "100000") as proc:
        [zygote] = children(proc.pid)  # the launcher forks the zygote, the zygote the nodes
        os.kill(zygote, signal.SIGKILL)
        lines = ended(proc, run, 1)
    assert lines == [f"dfl-launch: the zygote (pid {zygote}), which forks the nodes, died "
                     f"(killed by signal 9 (SIGKILL)); the run stopped; run directory {run}"]
    written = summary(run)
    assert written["status"] == "failed" and written["failed_node"] is None
    assert written["cause"]["kind"] == "zygote_died" and written["cause"]["pid"] == zygote
    assert temporaries(run) == []
