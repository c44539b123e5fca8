"""`import dfl_mesh`: a run from Python is the command line's run, as objects."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import dfl_mesh
from dfl_node.transports.liveness import STALL_ENV
from tests.harness import ENV_ROOT, ROOT
from tests.proc_util import node_pids, wait_for, wait_gone

QUICK = {"dataset": "synthetic", "partition": "iid", "eval_every": 1}


def test_a_run_is_its_directory_as_objects(tmp_path: Path, ring4: str) -> None:
    result = dfl_mesh.run(ring4, "dmfl-sq", rounds=3, transport="inproc", lr=0.05,
                          out=tmp_path / "run", plots=False, **QUICK)
    raw = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert result.ok and result.exit_code == 0 and result.raw == raw
    s = result.summary
    assert (s.status, s.protocol, s.rounds, s.transport) == ("ok", "dmfl-sq", 3, "inproc")
    assert (s.avg_accuracy, s.worst_accuracy) == (raw["avg_accuracy"], raw["worst_accuracy"])
    assert result.config["hyper"]["lr"] == 0.05  # a bare keyword is a config key, as --set
    m = result.metrics
    assert len(m) == 4 * 3 and set(m["round"]) == {1, 2, 3} and "formula_bits" in m
    ledger = result.ledger
    sent = ledger[(ledger["traffic"] == "data") & (ledger["recorded_by"] == ledger["src"])]
    assert int(sent["payload_bytes"].sum()) == raw["payload_bytes"]
    assert set(zip(result.links["src"], result.links["dst"], strict=True)) >= {(0, 1), (1, 0)}
    assert "summary.json" in result.files and result.plots == {}
    again = dfl_mesh.load(tmp_path / "run")
    assert again.summary == s and again.metrics.equals(m)


def test_bad_input_is_the_command_lines_line(tmp_path: Path, ring4: str) -> None:
    with pytest.raises(dfl_mesh.InputError) as caught:
        dfl_mesh.run(ring4, "d-psgd", out=tmp_path / "never", lr=-1)
    cli = subprocess.run([sys.executable, "-m", "launcher.cli", "--topology", ring4,
                          "--protocol", "d-psgd", "--set", "lr=-1"], capture_output=True,
                         text=True, env=ENV_ROOT, cwd=ROOT)
    assert (cli.returncode, cli.stdout) == (2, "")
    assert cli.stderr.strip() == f"dfl-launch: {caught.value}"
    with pytest.raises(dfl_mesh.InputError, match=r"^rounds='three': .*valid integer"):
        dfl_mesh.run(ring4, "d-psgd", out=tmp_path / "never", rounds="three")
    assert not (tmp_path / "never").exists()
    with pytest.raises(dfl_mesh.InputError, match=r"no summary\.json"):
        dfl_mesh.load(tmp_path)


def test_an_interrupt_stops_every_node_and_resume_finishes(
        tmp_path: Path, ring4: str, monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest) -> None:
    """Ctrl-C (a notebook's kernel interrupt is the same SIGINT) once the mesh has reported:
    RunInterrupted, no node process left; resume() then finishes the run. Node 0 stalls in
    round 3 (the liveness fault injection), so the interrupt cannot come after the run ended;
    the resumed nodes do not stall. A kernel has its SIGINT handler; a process started in the
    background by a shell without job control inherits SIGINT ignored and gets none, so the
    test sets Python's own (without it, the interrupt was ignored and the run finished)."""
    run = tmp_path / "run"
    monkeypatch.setenv(STALL_ENV, "0:3:120")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))

    def interrupt_once_reporting() -> None:
        wait_for(lambda: (run / "metrics.jsonl").is_file()
                 and (run / "metrics.jsonl").stat().st_size > 0, 120, "a first evaluation")
        os.kill(os.getpid(), signal.SIGINT)

    trigger = threading.Thread(target=interrupt_once_reporting, daemon=True)
    trigger.start()
    with pytest.raises(dfl_mesh.RunInterrupted) as caught:
        dfl_mesh.run(ring4, "d-psgd", rounds=60, checkpoint_every=1, out=run, plots=False,
                     **QUICK)
    trigger.join()
    assert caught.value.run_dir == run
    pids = node_pids(run)
    assert len(pids) == 4 and wait_gone(list(pids.values()), 30) == []
    assert json.loads((run / "summary.json").read_text())["status"] == "interrupted"
    monkeypatch.delenv(STALL_ENV)
    done = dfl_mesh.resume(run, plots=False)
    assert done.ok and done.metrics["round"].max() == 60
