"""The run directory is the user's: what `dfl-launch` refuses (exit 2, one line, nothing
touched), what `--overwrite` deletes (run files only), the lock that keeps a second launcher
out, the resume of a finished run (it changes nothing), and the disk-space preflight.

Refusals run the real entry point in this process (conftest's `entry`); the second launcher
meets a real first one, a `dfl-launch` subprocess that holds the directory."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from launcher.api.settings import keyword_spec
from launcher.run.claim import same_inputs
from tests.harness import ENV_ROOT, ROOT, Exited
from tests.mounts import read_only, tmpfs
from tests.proc_util import wait_for

FAST = ("--protocol", "d-psgd", "--dataset", "synthetic", "--transport", "inproc",
        "--no-plots", "--quiet")
THESIS = b"\\documentclass{article} my thesis, three years of it\n"
METRICS = b'{"my": "own metrics, not a run\'s"}\n'


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `folder`: its bytes and modification time (ns)."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def users_folder(tmp_path: Path) -> Path:
    """A directory of the user's with a thesis in `checkpoints/` and a file named like a run's."""
    folder = tmp_path / "d"
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "thesis.tex").write_bytes(THESIS)
    (folder / "metrics.jsonl").write_bytes(METRICS)
    return folder


def one_line(done: Exited) -> str:
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.err, done.err
    assert lines[0].startswith("dfl-launch: ")
    return lines[0]


def test_a_folder_of_the_users_is_refused_and_left_byte_for_byte(
        tmp_path: Path, ring4: str, entry: Callable[..., Exited]) -> None:
    folder = users_folder(tmp_path)
    before = snapshot(folder)
    done = entry("dfl-launch", "--topology", ring4, *FAST, "--rounds", "2", "--out", str(folder))
    assert done.code == 2 and done.out == ""
    line = one_line(done)
    assert "not empty" in line and "--overwrite" in line and "checkpoints" in line
    assert snapshot(folder) == before
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoints", "metrics.jsonl"]


def test_out_at_a_regular_file_is_one_line(tmp_path: Path, ring4: str,
                                           entry: Callable[..., Exited]) -> None:
    plain = tmp_path / "notes.txt"
    plain.write_bytes(b"mine")
    for out, reason in [(plain, "not a directory"), (plain / "run", "Not a directory")]:
        done = entry("dfl-launch", "--topology", ring4, *FAST, "--out", str(out))
        assert done.code == 2 and done.out == ""
        assert reason in one_line(done) and str(out) in one_line(done)
    assert plain.read_bytes() == b"mine"


def test_a_run_of_other_inputs_is_refused(tmp_path: Path, ring4: str,
                                          entry: Callable[..., Exited]) -> None:
    run = tmp_path / "run"
    assert entry("dfl-launch", "--topology", ring4, *FAST, "--rounds", "1",
                 "--out", str(run)).code == 0
    before = snapshot(run)
    done = entry("dfl-launch", "--topology", ring4, *FAST, "--rounds", "2", "--out", str(run))
    assert done.code == 2 and "holds a run of other inputs" in one_line(done)
    assert snapshot(run) == before


def test_overwrite_replaces_the_run_files_and_keeps_every_other(
        tmp_path: Path, ring4: str, entry: Callable[..., Exited]) -> None:
    folder = users_folder(tmp_path)
    (folder / "final").mkdir()
    stale = folder / "final" / "node-9.safetensors"  # a run file of some older run
    stale.write_bytes(b"old")
    done = entry("dfl-launch", "--topology", ring4, *FAST, "--rounds", "2",
                 "--checkpoint-every", "1", "--overwrite", "--out", str(folder))
    assert done.code == 0, done.err
    assert (folder / "checkpoints" / "thesis.tex").read_bytes() == THESIS
    assert not stale.exists()  # docs/run-directory.md: --overwrite deletes the run files
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert rows and all("accuracy" in row for row in rows)
    assert json.loads((folder / "summary.json").read_text())["status"] == "ok"


def test_resuming_a_finished_run_changes_no_file(tmp_path: Path, ring4: str,
                                                 entry: Callable[..., Exited]) -> None:
    run = tmp_path / "run"
    assert entry("dfl-launch", "--topology", ring4, *FAST, "--rounds", "2",
                 "--checkpoint-every", "1", "--out", str(run)).code == 0
    before = snapshot(run)
    for mounted in (contextlib.nullcontext(), read_only(run)):  # an archive on a read-only disk
        with mounted:
            done = entry("dfl-launch", "--resume", str(run))
        assert done.code == 0 and done.err == "", done.err
        assert done.out.splitlines() == [f"run_dir: {run}  finished already (summary.json: "
                                         "status ok); nothing to resume"]
        assert snapshot(run) == before


def test_an_unfinished_run_on_a_read_only_disk_is_refused_before_it_starts(
        tmp_path: Path, ring4: str, entry: Callable[..., Exited]) -> None:
    run = tmp_path / "run"
    assert entry("dfl-launch", "--topology", ring4, *FAST, "--rounds", "1",
                 "--out", str(run)).code == 0
    (run / "summary.json").unlink()  # as a killed run has none
    before = snapshot(run)
    with read_only(run):
        done = entry("dfl-launch", "--resume", str(run))
    assert done.code == 2 and done.out == ""
    assert one_line(done) == (f"dfl-launch: {run}: cannot write the run directory: Read-only "
                              "file system")
    assert snapshot(run) == before


def test_a_second_launcher_is_refused_naming_the_first(tmp_path: Path, ring4: str,
                                                       entry: Callable[..., Exited]) -> None:
    """A real first launcher holds the directory (its run goes on until the test stops it);
    a new run of the same inputs and a --resume are both refused, naming its pid."""
    run = tmp_path / "run"
    args = ("--topology", ring4, *FAST, "--rounds", "100000", "--out", str(run))
    first = subprocess.Popen([sys.executable, "-m", "launcher.cli", *args], cwd=ROOT,
                             env=ENV_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             start_new_session=True)
    try:
        wait_for(lambda: (run / "metrics.jsonl").is_file() or first.poll() is not None, 120,
                 "the first run's first evaluation")
        assert first.poll() is None, first.stderr.read()  # type: ignore[union-attr]
        inputs = (run / "inputs.json").read_bytes()
        for second in (args, ("--resume", str(run))):
            done = entry("dfl-launch", *second)
            assert done.code == 2 and done.out == ""
            assert f"in use by another launcher (pid {first.pid}," in one_line(done)
        assert first.poll() is None  # the refused ones stopped nothing and rewrote nothing
        assert (run / "inputs.json").read_bytes() == inputs
        assert (run / "run.lock").read_text() == f"{first.pid}\n"
    finally:
        os.killpg(first.pid, signal.SIGINT)
        first.communicate(timeout=120)
    assert first.returncode == 130


def test_a_run_whose_checkpoints_cannot_fit_is_refused_with_the_estimate(
        tmp_path: Path, ring4: str, entry: Callable[..., Exited]) -> None:
    with tmpfs(tmp_path / "small", "1m") as small:
        run = small / "run"
        done = entry("dfl-launch", "--topology", ring4, *FAST, "--rounds", "50",
                     "--checkpoint-every", "5", "--out", str(run))
        assert done.code == 2 and done.out == ""
        line = one_line(done)
        assert "1.0 MB free" in line and "may need up to" in line and "--checkpoint-every" in line
        assert not (run / "plan.json").exists()
        assert entry("dfl-launch", "--topology", ring4, *FAST, "--rounds", "50",
                     "--checkpoint-every", "0", "--out", str(run)).code == 0


def test_a_run_recorded_before_an_option_existed_has_the_same_inputs(tmp_path: Path,
                                                                    ring4: str) -> None:
    """An option left unset is its default, whether the run directory was written before the
    option existed (its inputs.json lacks the key) or after (it holds null): a sweep or a
    reproduction then finds its finished runs its own, and a changed value still does not."""
    req = keyword_spec(ring4, "d-psgd", None, {"dataset": "synthetic", "rounds": 3}, {})
    recorded = json.loads(json.dumps(req.recorded()))
    assert recorded["options"]["on_corrupt"] is None
    del recorded["options"]["on_corrupt"]
    assert same_inputs(recorded, req)
    recorded["options"]["rounds"] = 4
    assert not same_inputs(recorded, req)
