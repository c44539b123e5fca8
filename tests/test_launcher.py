"""dfl-launch as an operator meets it: bad input, killed nodes, killed launchers, Ctrl-C,
concurrent runs, seeds, plans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from launcher.config.devices import resolve_devices
from launcher.errors import LaunchError
from tests.harness import ROOT, Exited, launch, launch_ok
from tests.proc_util import descendants, node_pids, wait_for, wait_gone

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def start(out: Path, topology: str, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "launcher.cli", "--topology", topology, "--protocol", "d-psgd",
           "--out", str(out), "--dataset", "synthetic", "--no-plots", *args]
    return subprocess.Popen(cmd, env=ENV, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def metrics_lines(run_dir: Path) -> int:
    path = run_dir / "metrics.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize(("args", "needle"), [
    (["--topology", "ring20", "--protocol", "nope"], "--protocol"),
    (["--topology", "no/such/file.yaml", "--protocol", "d-psgd"], "file.yaml"),
    (["--topology", "ring20", "--protocol", "d-psgd", "--set", "bogus=1"], "bogus"),
    (["--topology", "ring20", "--protocol", "d-psgd", "--set", "link.nope=1"], "nope"),
    (["--topology", "ring20", "--protocol", "d-psgd", "--rounds", "0"], "rounds"),
    (["--topology", "ring20", "--protocol", "d-psgd", "--seeds", "3-1"], "--seeds"),
    (["--topology", "ring20", "--protocol", "d-psgd", "--transport", "udp"], "transport"),
    (["--topology", "ring20", "--protocol", "d-psgd", "--mixing-typo", "x"], "mixing-typo"),
    (["--protocol", "d-psgd"], "--topology"),
    (["--topology", "ring20", "--protocol", "d-psgd", "--set", "lr=0"], "lr"),
    (["--topology", "ring20", "--protocol", "dmfl-sq", "--set", "rho=-1"], "rho"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, entry: Callable[..., Exited],
                                          args: list[str], needle: str) -> None:
    done = entry("dfl-launch", *args, "--out", str(tmp_path / "r"))
    assert done.code == 2, done.err
    assert done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.err
    assert lines[0].startswith("dfl-launch: ") and needle in lines[0]
    assert not (tmp_path / "r").exists()


def test_a_gpu_that_does_not_exist_is_bad_input(tmp_path: Path) -> None:
    topo = tmp_path / "gpu.yaml"
    topo.write_text("nodes: [{id: 0, device: 'cuda:7'}, {id: 1}]\nedges: [[0, 1]]\n")
    proc = launch(tmp_path / "r", str(topo), "d-psgd")
    visible = torch.cuda.device_count()
    if visible > 7:
        pytest.skip("this machine has a cuda:7")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (
        f"dfl-launch: node 0: device 'cuda:7' does not exist ({visible} CUDA device(s) visible)")


def test_device_resolution() -> None:
    nodes = [(0, "auto"), (1, "auto"), (2, "cpu"), (3, "auto"), (4, None), (5, "cuda")]
    assert resolve_devices(nodes, gpus=2) == ["cuda:0", "cuda:1", "cpu", "cuda:0", "cpu",
                                              "cuda:0"]
    assert resolve_devices(nodes[:5], gpus=0) == ["cpu"] * 5
    with pytest.raises(LaunchError, match="node 5: device 'cuda'"):
        resolve_devices(nodes, gpus=0)


def test_sigkill_of_a_node_stops_the_run_naming_it(tmp_path: Path, hex6: str) -> None:
    run = tmp_path / "r"
    proc = start(run, hex6, "--rounds", "100000")
    try:
        wait_for(lambda: metrics_lines(run) >= 12, 120, "two evaluations")
        family = descendants(proc.pid)
        pids = node_pids(run)
        assert len(pids) == 6
        os.kill(pids[2], signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert "node 2 failed (killed by signal 9 (SIGKILL))" in err
    assert wait_gone(family, 10) == []
    kept = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(kept) >= 12 and {r["node"] for r in kept} == set(range(6))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["failed_node"] == 2


def test_sigkill_of_the_launcher_takes_every_node_down(tmp_path: Path, hex6: str) -> None:
    run = tmp_path / "r"
    proc = start(run, hex6, "--rounds", "100000")
    try:
        wait_for(lambda: metrics_lines(run) >= 6, 120, "an evaluation")
        family = descendants(proc.pid)
        assert set(node_pids(run).values()) <= set(family)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
        assert wait_gone(family, 10) == []
    finally:
        if proc.poll() is None:
            proc.kill()


def test_ctrl_c_stops_everything_with_130(tmp_path: Path, hex6: str) -> None:
    run = tmp_path / "r"
    proc = start(run, hex6, "--rounds", "100000")
    try:
        wait_for(lambda: metrics_lines(run) >= 6, 120, "an evaluation")
        family = descendants(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert wait_gone(family, 10) == []
    assert json.loads((run / "summary.json").read_text())["status"] == "interrupted"


def test_two_runs_started_together_both_succeed(tmp_path: Path, hex6: str) -> None:
    procs = [start(tmp_path / f"r{i}", hex6, "--rounds", "3") for i in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    plans = [json.loads((tmp_path / f"r{i}" / "plan.json").read_text()) for i in range(2)]
    ports = [{n["bind"] for n in plan["nodes"]} | {plan["collector"]} for plan in plans]
    assert not ports[0] & ports[1]


def test_seeds_give_one_run_directory_each(tmp_path: Path, hex6: str) -> None:
    proc = launch(tmp_path / "multi", hex6, "d-psgd", "--seeds", "3-4", "--rounds", "2",
                  "--transport", "inproc", "--dataset", "synthetic")
    assert proc.returncode == 0, proc.stderr
    seeds = [json.loads((tmp_path / "multi" / f"seed-{s}" / "summary.json").read_text())["seed"]
             for s in (3, 4)]
    assert seeds == [3, 4]
    a, b = ((tmp_path / "multi" / f"seed-{s}" / "final" / "node-0.safetensors").read_bytes()
            for s in (3, 4))
    assert a != b


def test_plan_subcommand_and_dfl_node_by_hand(tmp_path: Path, hex6: str) -> None:
    out = tmp_path / "plan.json"
    proc = subprocess.run([sys.executable, "-m", "launcher.cli", "plan", "--topology", hex6,
                           "--protocol", "d-psgd", "--rounds", "4", "-o", str(out)], env=ENV,
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(out.read_text())
    assert plan["rounds"] == 4 and len(plan["nodes"]) == 6
    assert set(plan["hashes"]) == {"topology", "protocol", "data", "seeds", "runtime",
                                   "prephase", "schedule"}
    bad = subprocess.run([sys.executable, "-m", "launcher.node_cli", "--plan", str(out),
                          "--node-id", "99"], env=ENV, cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "dfl-node: node 99 is not in the plan (nodes: [0, 1, 2, 3, 4, 5])"]


def test_summary_lists_every_node(tmp_path: Path, hex6: str) -> None:
    summary = launch_ok(tmp_path / "r", hex6, "d-psgd", "--rounds", "2", "--dataset", "synthetic")
    assert [n["id"] for n in summary["nodes"]] == list(range(6))
    assert len({n["pid"] for n in summary["nodes"]}) == 6
    assert summary["status"] == "ok" and summary["rejected_messages"] == {}
