"""Runs of the programs for tests, and the exactness harness: run a plan under both transports
and demand identical `final/` files (compared by the exactness kit, dfl_mesh.testing, which
plugin authors' tests use too).

Each protocol adds one line: `assert_transports_identical(tmp_path, "ring20", "<protocol>")`.

A run is the program's real entry point called in the test's process (`in_process`), its argv,
stdout and stderr its own for the call: a subprocess would add seconds of importing torch to every
run, and the nodes are separate processes either way (the launcher forks them, as it does for
`dfl_mesh.run` in a notebook). Tests of the process boundary itself (signals, exit codes seen by
a shell, a second interpreter) start `dfl-launch` as a subprocess.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dfl_mesh.testing.compare import final_difference, final_files
from dfl_node.transports.liveness import STALL_ENV
from launcher.cli import main as launch_main
from launcher.node_cli import main as node_main
from launcher.report_cli import main as report_main
from topologies.cli import main as topology_main
from topologies.schedules import RoundGraphs

# The smallest mesh in which every node has two neighbours, for tests of the run machinery.
RING4 = """\
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}]
edges: [[0, 1], [1, 2], [2, 3], [3, 0]]
"""
# A plan's data section as the launcher writes it for the default synthetic dataset, for plans
# a test builds by hand.
SYNTHETIC_DATA: dict[str, Any] = {
    "dataset": "synthetic", "data_root": None, "partition": "iid", "eval_split": "global",
    "seed": 0, "eval_size": 2000, "num_classes": 10, "shape": [32], "synthetic": {}}



def random_peers_file(directory: Path, n: int, peers: int) -> str:
    """A complete graph of `n` nodes on which each node sends to `peers` of the others drawn
    afresh every round (Epidemic Learning's EL-Local sampling; topologies/schedules.py)."""
    path = directory / f"peers{n}-{peers}.yaml"
    edges = ", ".join(f"[{i}, {j}]" for i in range(n) for j in range(i + 1, n))
    path.write_text(f"schedule: {{kind: random-peers, peers: {peers}}}\n"
                    f"nodes: [{', '.join(f'{{id: {i}}}' for i in range(n))}]\n"
                    f"edges: [{edges}]\n")
    return str(path)


ROOT = Path(__file__).resolve().parents[1]
ENV_ROOT = {**os.environ, "PYTHONPATH": str(ROOT)}


ENTRY_POINTS: dict[str, Callable[[], None]] = {
    "dfl-launch": launch_main, "dfl-topology": topology_main, "dfl-node": node_main,
    "dfl-report": report_main,
}


@dataclass(frozen=True)
class Exited:
    """What a shell would see of one program run: exit code, stdout, stderr."""

    code: int
    out: str
    err: str


def in_process(prog: str, *args: str) -> Exited:
    """Run `prog`'s entry point here with `args` as its argv, from the repository root, its
    stdout and stderr captured; the process's argv, directory and SIGINT handler (which
    `run_cli` sets) are as before afterwards."""
    out, err = io.StringIO(), io.StringIO()
    argv, cwd, sigint = sys.argv, os.getcwd(), signal.getsignal(signal.SIGINT)
    sys.argv = [prog, *args]
    os.chdir(ROOT)
    code: object = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                ENTRY_POINTS[prog]()
            except SystemExit as exc:
                code = exc.code
    finally:
        sys.argv = argv
        os.chdir(cwd)
        signal.signal(signal.SIGINT, sigint)
    exit_code = 0 if code is None else code if isinstance(code, int) else 1
    return Exited(exit_code, out.getvalue(), err.getvalue())


def launch(
    out: Path, topology: str, protocol: str, *args: str, timeout_s: float = 600,
    plots: bool = False, python: str = sys.executable,
) -> subprocess.CompletedProcess:
    """`dfl-launch` as a user runs it: in this process (`in_process`), or, given another
    interpreter, in a subprocess under `timeout_s`. Plots are off unless asked for: they cost
    seconds per run and tests/test_plots.py covers them."""
    args = ("--topology", topology, "--protocol", protocol, "--out", str(out),
            *(() if plots else ("--no-plots",)), *args)
    if python != sys.executable:
        return subprocess.run([python, "-m", "launcher.cli", *args], capture_output=True,
                              text=True, timeout=timeout_s, env=ENV_ROOT, cwd=ROOT)
    done = in_process("dfl-launch", *args)
    return subprocess.CompletedProcess(["dfl-launch", *args], done.code, done.out, done.err)


def launch_ok(
    out: Path, topology: str, protocol: str, *args: str, plots: bool = False,
    python: str = sys.executable,
) -> dict[str, Any]:
    proc = launch(out, topology, protocol, *args, plots=plots, python=python)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "summary.json").read_text())


def assert_transports_identical(
    tmp_path: Path, topology: str, protocol: str, *args: str, python: str = sys.executable,
) -> tuple[dict[str, Any], dict[str, Any]]:
    zmq_sum = launch_ok(tmp_path / "zmq", topology, protocol, "--transport", "zmq", *args,
                        python=python)
    inproc_sum = launch_ok(tmp_path / "inproc", topology, protocol, "--transport", "inproc", *args,
                           python=python)
    differ = final_difference(tmp_path / "zmq", tmp_path / "inproc")
    assert differ is None, differ
    models = [name for name in final_files(tmp_path / "zmq")
              if not name.endswith("-copies.safetensors")]  # + extra_state
    assert len(models) == len(zmq_sum["nodes"]) + len(zmq_sum.get("aggregators", []))
    return zmq_sum, inproc_sum


def start_stalled_ring4(tmp_path: Path, rounds: int, hold_s: float) -> subprocess.Popen[str]:
    """`dfl-launch` of a small d-psgd run on RING4 into TMP/run, node 0 computing `hold_s` at
    the start of round 1 (the liveness fault injection): a mesh that stays up, sockets
    listening, while a test attacks it. Its output is piped."""
    (tmp_path / "ring4.yaml").write_text(RING4)
    return subprocess.Popen(
        [sys.executable, "-m", "launcher.cli", "--topology", str(tmp_path / "ring4.yaml"),
         "--protocol", "d-psgd", "--dataset", "synthetic", "--rounds", str(rounds),
         "--set", "model={name: mlp, hidden: [8]}", "--out", str(tmp_path / "run"), "--quiet",
         "--no-plots"],
        env={**ENV_ROOT, STALL_ENV: f"0:1:{hold_s}"}, cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def charged_and_drawn_arcs(run_dir: Path, rounds: int) -> tuple[list[tuple[int, int, int]],
                                                                list[tuple[int, int, int]]]:
    """(round, src, dst) of every formula cell a run charged, and of every arc its topology's
    schedule drew, both sorted: equal when a push charges exactly the arcs it sent on."""
    plan = json.loads((run_dir / "plan.json").read_text())
    ledger = json.loads((run_dir / "ledger.json").read_text())
    graphs = RoundGraphs.from_topology(plan["topology"])
    charged = sorted((c["round"], c["src"], c["dst"]) for rec in ledger.values()
                     for c in rec["formula_cells"])
    drawn = sorted((r, u, v) for r in range(rounds) for u, v in graphs.arcs(r, plan["seed"]))
    return charged, drawn


def installed_env(site: Path, distribution: str, entry_points: str,
                  *paths: Path) -> dict[str, str]:
    """An environment in which `distribution` is installed as pip would leave it for the
    registry (a .dist-info with `entry_points` in `site`), its modules on `paths`: plugin
    protocols registered without building a package. The registry reads entry points once per
    process, so what runs in it is a subprocess."""
    dist = site / f"{distribution.replace('-', '_')}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\n"
                                   "Version: 0.1\n")
    (dist / "entry_points.txt").write_text(entry_points)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (site, *paths, ROOT)))}


def run_plugin_tests(plugin: Path, env: dict[str, str], tmp_path: Path) -> str:
    """The plugin package's own `pytest tests` in a checkout of its own (no configuration of
    this repository); its output, after asserting that it passed."""
    checkout = tmp_path / plugin.name
    shutil.copytree(plugin, checkout)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests"], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done.stdout
