"""`python -m bench` stopped by a real SIGTERM, as a job scheduler's time limit stops it: the
JSON of each finished group is on disk before the signal, the table and the JSON of what was
measured are written after it, exit 143, and no process the suite started outlives it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.launch import ROOT
from bench.stopping import Process, descendants, running

DEADLINE_S = 240.0  # for the suite's steps, on a loaded 2-core machine
GONE_S = 5.0  # for a SIGKILLed process to go: far less than an orphaned mesh would run on
POLL_S = 0.1


def poll(what: str, check: Any, deadline_s: float = DEADLINE_S) -> Any:
    """check()'s first true value, polled until `deadline_s`."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(POLL_S)
    raise AssertionError(f"no {what} within {deadline_s:.0f} s")


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
        first = poll("JSON of the first group", lambda: written(out))
        assert first["state"] == "running"
        assert [(f["group"], f["outcome"]) for f in first["figures"]] == [("compute", "skipped")]
        # the launcher, its zygote and nodes: a mesh that runs
        tree = poll("first_run's mesh", lambda: (lambda t: t if len(t) >= 5 else None)(
            descendants(suite.pid)))
        assert any("launcher.cli" in command_line(p) for p in tree)
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
    # the suite waited for them to end, or SIGKILLed them, before it exited
    poll("end of every process the suite started", lambda: not any(map(running, tree)), GONE_S)
