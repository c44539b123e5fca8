"""What dfl-launch prints while a run goes: JSON lines into a pipe, a live view on a terminal."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from dfl_node.plan import RunPlan
from launcher.config.run_spec import RunSpec
from launcher.launch import write_plan_only
from launcher.run.outcome import Outcome
from launcher.run.progress import (
    Display,
    JsonLines,
    Live,
    RoundTable,
    human_bytes,
    open_display,
)
from protocols.registry import protocol_spec
from tests.harness import ENV_ROOT, ROOT, launch

RUN = ("--dataset", "synthetic", "--partition", "iid", "--rounds", "3", "--eval-every", "1",
       "--transport", "inproc")
METRICS_KEYS = {"round", "node", "accuracy", "loss", "wire_bytes", "virtual_seconds",
                "eval_split"}


def test_piped_stdout_is_the_metrics_lines_then_the_run_dir(tmp_path: Path, hex6: str) -> None:
    run = tmp_path / "run"
    proc = launch(run, hex6, "d-psgd", *RUN)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    *lines, last = proc.stdout.splitlines()
    assert last == end_line(run)
    records = [json.loads(line) for line in lines]
    assert all(isinstance(r, dict) and r.keys() >= METRICS_KEYS for r in records)
    assert len(records) == 3 * 6 and {r["round"] for r in records} == {1, 2, 3}
    assert lines == (run / "metrics.jsonl").read_text().splitlines()
    assert not (run / "plots").exists()  # the harness passes --no-plots


def test_quiet_leaves_only_the_last_line(tmp_path: Path, hex6: str) -> None:
    run = tmp_path / "run"
    proc = launch(run, hex6, "d-psgd", *RUN, "--quiet")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, end_line(run) + "\n", "")


def end_line(run: Path) -> str:
    """What every successful run ends with: its directory, its average and worst accuracy."""
    summary = json.loads((run / "summary.json").read_text())
    return (f"run_dir: {run}  avg_accuracy={summary['avg_accuracy']:.4f}  "
            f"worst_accuracy={summary['worst_accuracy']:.4f}")


def read_pty(cmd: list[str], timeout_s: float = 120) -> tuple[int, str]:
    """Run `cmd` with stdout on a pseudo-terminal (as a user's shell has it); its output."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.PIPE, env={
        **ENV_ROOT, "COLUMNS": "160", "TERM": "xterm"}, cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], timeout_s)
        assert ready, "the launcher went silent"
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the launcher closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return proc.wait(timeout_s), b"".join(chunks).decode(errors="replace")


def test_a_terminal_gets_the_live_view_and_its_final_table(tmp_path: Path, hex6: str) -> None:
    run = tmp_path / "run"
    code, out = read_pty([sys.executable, "-m", "launcher.cli", "--topology", hex6,
                          "--protocol", "d-psgd", "--out", str(run), "--no-plots", *RUN])
    assert code == 0
    summary = json.loads((run / "summary.json").read_text())
    assert "\x1b[" in out  # drawn, not printed
    lines = [line.strip() for line in out.replace("\r", "\n").splitlines()]
    assert lines[-1 if lines[-1] else -2] == end_line(run)
    final_row = [line.split() for line in lines if line.startswith("3 ")][-1]
    assert final_row[1] == f"{summary['avg_accuracy']:.4f}"
    assert final_row[2] == f"{summary['worst_accuracy']:.4f}"
    assert final_row[-2:] == ["6/6", "6"]
    assert not any(line.startswith("{") for line in lines)  # no JSON on a terminal


def record(node: int, r: int, acc: float, **extra: float) -> dict:
    return {"node": node, "round": r, "accuracy": acc, "loss": 1.0 - acc, "wire_bytes": 1500,
            "virtual_seconds": 0.5 * r + 0.1 * node, **extra}


def test_round_table_aggregates_what_arrived() -> None:
    table = RoundTable(clients=3, started=0.0, bits_metric="paper_bits")
    for node, acc in enumerate((0.5, 0.7, 0.9)):
        table.add(record(node, 1, acc, paper_bits=100.0 * (node + 1)), alive=3)
    table.add(record(0, 2, 0.6), alive=2)
    assert table.complete() == 1
    first, second = table.latest()
    assert first[:7] == ["1", "0.7000", "0.5000", "0.3000", "200", "4.5 KB", "0.70"]
    assert first[-2:] == ["3/3", "3"]
    assert second[4] == "n/a" and second[-2:] == ["1/3", "2"]


def test_bits_column_shows_the_declared_key_only() -> None:
    """The launcher knows no protocol's metric keys: the bits column reads the key the
    protocol's declaration names (`bits_metric`), and nothing when it names none."""
    undeclared = RoundTable(clients=1, started=0.0)
    undeclared.add(record(0, 1, 0.5, formula_bits=64.0), alive=1)
    assert undeclared.latest()[0][4] == "n/a"
    assert protocol_spec("dmfl-sq").bits_metric == "formula_bits"
    assert protocol_spec("d-psgd").bits_metric is None


def test_human_bytes() -> None:
    assert [human_bytes(n) for n in (999, 1000, 2_500_000, 7e9, 3e12)] == \
        ["999 B", "1.0 KB", "2.5 MB", "7.0 GB", "3000.0 GB"]


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class Pipe:
    def isatty(self) -> bool:
        return False


def test_the_display_follows_stdout_and_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    pipe = open_display(False, Pipe())  # type: ignore[arg-type]
    assert isinstance(pipe, JsonLines)
    pipe.on_record("ready", {"node": 0})
    pipe.on_record("metrics", record(0, 1, 0.5))
    pipe.close()
    pipe.final(Path("runs/x"), Outcome(False, failed_node=3, reason="exit code 1"), {})
    out = capsys.readouterr().out.splitlines()
    assert json.loads(out[0]) == record(0, 1, 0.5)
    assert out[1] == "run_dir: runs/x  failed: node 3 (exit code 1)"
    quiet = open_display(True, Terminal())  # type: ignore[arg-type]
    assert type(quiet) is Display and not quiet.pipe
    assert type(open_display(True, Pipe())) is Display  # type: ignore[arg-type]


def test_the_live_view_names_each_step_and_draws_the_rounds(tmp_path: Path, hex6: str) -> None:
    write_plan_only(RunSpec(topology=hex6, protocol="d-psgd",
                            options={"dataset": "synthetic", "rounds": 2}),
                    tmp_path / "plan.json")
    plan = RunPlan.load(tmp_path / "plan.json")
    screen = Terminal()
    live = open_display(False, screen)
    assert isinstance(live, Live)

    def shown() -> str:
        live.live.refresh()
        return screen.getvalue()

    live.stage("resolving the plan, preparing data")
    assert "resolving the plan, preparing data" in shown()
    live.start(plan)
    live.on_record("ready", {"node": 0})
    assert "starting nodes: 1/6 ready" in shown()
    for node in range(1, 6):
        live.on_record("ready", {"node": node})
    assert "first round" in shown()
    for node in range(6):
        live.on_record("metrics", record(node, 1, 0.5 + 0.01 * node))
    assert "1/2" in shown()  # the bar: one of two rounds done
    live.close()
    final = screen.getvalue().splitlines()[-1].split()
    assert final[:3] == ["1", "0.5250", "0.5000"] and final[-2:] == ["6/6", "6"]
