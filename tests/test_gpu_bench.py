"""bench/gpu.sh where there is no GPU, and its CUDA path run on the CPU: the same steps, tiny.

CI has no GPU, so what a lent GPU machine will run is tested here with `--device cpu`: the
side-by-side (the bare pyzmq+torch mesh of bench/device_mesh.py against dfl-mesh, real
processes and sockets) and the zmq = inproc check of the exactness kit. No time is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cuda_check import NO_DEVICE

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_sh_without_a_cuda_device_says_so_in_one_line() -> None:
    """No device visible: one line on stderr, nothing on stdout, exit 77 (skipped), and no
    result directory written."""
    env = {**os.environ, "PY": sys.executable, "CUDA_VISIBLE_DEVICES": "",
           "OUT": "gpu-out-never-written"}
    done = subprocess.run(["bash", "bench/gpu.sh"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == NO_DEVICE, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench/gpu.sh: no CUDA device here ("), lines
    assert lines[0].endswith("): nothing measured")
    assert not (ROOT / "gpu-out-never-written").exists()


def test_gpu_sh_asks_for_the_device_it_is_given() -> None:
    """`--device cuda:7` on a machine without it is the same one line; `--device cpu` would
    run (so the check reads the option, not a fixed name)."""
    env = {**os.environ, "PY": sys.executable, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(["bash", "bench/gpu.sh", "--out", "unused", "--device=cuda:7"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == NO_DEVICE
    cpu = subprocess.run([sys.executable, "-m", "bench.cuda_check", "cpu"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert (cpu.returncode, cpu.stderr) == (0, "")


@pytest.mark.slow
def test_the_cuda_steps_run_on_the_cpu(tmp_path: Path) -> None:
    """bench.gpu's side-by-side and protocol exactness with `--device cpu`: a ring of 3 bare
    nodes and of 3 dfl-mesh nodes (the MLP, 3 rounds), then d-psgd over zmq and inproc on the
    kit's mesh; gpu.json holds each system's round and CPU and the ratio, and `equal`."""
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "bench.gpu", "--out", str(out), "--device", "cpu",
         "--skip", "runs,transfer", "--work", str(tmp_path / "work")],
        cwd=ROOT, env={**os.environ, "DFL_MESH_CACHE": str(tmp_path / "cache")},
        capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads((out / "gpu.json").read_text())
    assert not [k for k in data if k.startswith("error_")], data
    found = data["side_by_side"]
    assert found["nodes"] == 3 and "stopped" not in found and "dfl-mesh skipped" not in found
    mlp = found["summary"]["MLP"]
    for system in ("bare", "dfl-mesh"):
        assert mlp[system]["runs"] == 1 and mlp[system]["round_s"] > 0 < mlp[system]["cpu_ms"]
    assert mlp["dfl-mesh / bare"]["round"] > 0
    assert "bare pinned" not in mlp  # pinned host memory needs CUDA
    assert data["protocols"]["d-psgd"]["outcome"] == "equal"
    assert "MLP ring3 dfl-mesh / bare: round" in (out / "gpu.txt").read_text()
