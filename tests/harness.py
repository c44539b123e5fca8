"""The exactness harness: run a plan under both transports and demand identical `final/` files.

Each protocol adds one line: `assert_transports_identical(tmp_path, "ring20", "<protocol>")`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from safetensors.numpy import load_file

# The smallest mesh in which every node has two neighbours, for tests of the run machinery.
RING4 = """\
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}]
edges: [[0, 1], [1, 2], [2, 3], [3, 0]]
"""

ROOT = Path(__file__).resolve().parents[1]
ENV_ROOT = {**os.environ, "PYTHONPATH": str(ROOT)}


def launch(
    out: Path, topology: str, protocol: str, *args: str, timeout_s: float = 600,
    plots: bool = False, python: str = sys.executable,
) -> subprocess.CompletedProcess:
    """`dfl-launch` as a user runs it, in a subprocess, never hanging the suite. Plots are off
    unless asked for: they cost seconds per run and tests/test_plots.py covers them."""
    cmd = [
        python,
        "-m",
        "launcher.cli",
        "--topology",
        topology,
        "--protocol",
        protocol,
        "--out",
        str(out),
        *(() if plots else ("--no-plots",)),
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=ENV_ROOT,
                          cwd=ROOT)


def launch_ok(
    out: Path, topology: str, protocol: str, *args: str, plots: bool = False,
    python: str = sys.executable,
) -> dict[str, Any]:
    proc = launch(out, topology, protocol, *args, plots=plots, python=python)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "summary.json").read_text())


def final_files(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run_dir / "final").glob("*.safetensors"))}


def assert_transports_identical(
    tmp_path: Path, topology: str, protocol: str, *args: str, python: str = sys.executable,
) -> tuple[dict[str, Any], dict[str, Any]]:
    zmq_sum = launch_ok(tmp_path / "zmq", topology, protocol, "--transport", "zmq", *args,
                        python=python)
    inproc_sum = launch_ok(tmp_path / "inproc", topology, protocol, "--transport", "inproc", *args,
                           python=python)
    a, b = final_files(tmp_path / "zmq"), final_files(tmp_path / "inproc")
    models = [name for name in a if not name.endswith("-copies.safetensors")]  # + extra_state
    nodes = len(zmq_sum["nodes"]) + len(zmq_sum.get("aggregators", []))
    assert sorted(a) == sorted(b) and len(models) == nodes
    for name in a:
        ta, tb = (
            load_file(str(tmp_path / "zmq" / "final" / name)),
            load_file(str(tmp_path / "inproc" / "final" / name)),
        )
        assert ta.keys() == tb.keys()
        for key in ta:
            assert ta[key].tobytes() == tb[key].tobytes(), f"{name}:{key} differs"
        assert a[name] == b[name]
    return zmq_sum, inproc_sum
