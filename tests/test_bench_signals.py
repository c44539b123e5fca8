"""`python -m bench` stopped by a real SIGTERM, as a job scheduler's time limit stops it: the
JSON of each finished group is on disk before the signal, the table and the JSON of what was
measured are written after it, exit 143, and no process the suite started outlives it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.launch import ROOT
from bench.stopping import Process, descendants, running

DEADLINE_S = 240.0  # for the suite's steps, on a loaded 2-core machine


def stderr_line(suite: subprocess.Popen[str], starts: str) -> str:
    """The suite's first stderr line that starts with `starts` (it says each step as it takes
    it); read as the suite writes, so nothing is polled. The suite's end first fails."""
    assert suite.stderr is not None
    for line in suite.stderr:
        if line.startswith(starts):
            return line
    raise AssertionError(f"the suite ended (exit {suite.wait()}) before saying {starts!r}")


def written(path: Path) -> dict[str, Any] | None:
    """The suite's JSON, None before its first write (a rename: never half a file)."""
    return json.loads(path.read_text()) if path.exists() else None


def command_line(proc: Process) -> str:
    try:
        return Path(f"/proc/{proc.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_sigterm_mid_suite_keeps_the_finished_groups_and_stops_every_process(
        tmp_path: Path) -> None:
    """compute finds no data (its SKIPPED row, in seconds), then first_run's launcher runs a
    mesh in a session of its own, which a signal to the suite's process group would not reach:
    the suite alone gets SIGTERM."""
    out = tmp_path / "bench.json"
    empty = tmp_path / "no-data"
    empty.mkdir()
    suite = subprocess.Popen(
        [sys.executable, "-m", "bench", "--only", "compute,first_run", "--data-root", str(empty),
         "--json", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True)
    try:
        stderr_line(suite, "bench: first_run ...")  # compute's row is on disk before it starts
        first = written(out)
        assert first is not None and first["state"] == "running"
        assert [(f["group"], f["outcome"]) for f in first["figures"]] == [("compute", "skipped")]
        stderr_line(suite, "bench: first_run: d-psgd on ring20: round ")  # its mesh evaluates
        tree = descendants(suite.pid)  # the launcher, its zygote and nodes
        assert len(tree) >= 5 and any("launcher.cli" in command_line(p) for p in tree)
        suite.send_signal(signal.SIGTERM)
        stdout, stderr = suite.communicate(timeout=DEADLINE_S)
    finally:
        if suite.poll() is None:
            os.killpg(suite.pid, signal.SIGKILL)
            suite.wait()
    assert suite.returncode == 143, stderr[-2000:]
    lines = stdout.splitlines()
    assert any(line.startswith("compute    SKIPPED: cifar10: nothing usable at") for line in lines)
    [stopped] = [line for line in lines if line.startswith("first_run")]
    assert stopped.startswith("first_run  INTERRUPTED: terminated (SIGTERM) ")
    final = written(out)
    assert final is not None and final["state"] == "terminated (SIGTERM)"
    assert [(f["group"], f["outcome"]) for f in final["figures"]] == [
        ("compute", "skipped"), ("first_run", "interrupted")]
    assert set(final["machine"]["group_seconds"]) == {"compute", "first_run"}
    assert not list(tmp_path.glob(".bench.json.*.tmp"))
    # the suite waited for them to end, or SIGKILLed them and saw them end, before it exited
    assert not [p for p in tree if running(p)]
