"""The forkserver's warm-up: a GPU mesh's forkserver must run no backward pass (it would start
the CUDA driver before the fork, and every node's first CUDA call would fail)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dfl_node.learning.torch_settings import WARM_UP_ENV
from launcher.backends.processes import warm_up_mode
from tests.harness import ENV_ROOT, ROOT

COUNT_BACKWARDS = ("import torch; calls = []; "
                   "torch.Tensor.backward = lambda *a, **k: calls.append(1); "
                   "import launcher.backends.preload; print(len(calls))")


@pytest.mark.parametrize(("mode", "backwards"), [("forward", "0"), ("full", "2")])
def test_the_warm_up_runs_backward_only_in_full_mode(mode: str, backwards: str) -> None:
    proc = subprocess.run([sys.executable, "-c", COUNT_BACKWARDS], cwd=ROOT,
                          env={**ENV_ROOT, WARM_UP_ENV: mode}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == backwards


def test_a_mesh_with_any_gpu_node_warms_up_forward_only() -> None:
    assert warm_up_mode(["cpu", "cpu"]) == "full"
    assert warm_up_mode(["cpu", "cuda:0"]) == "forward"
    assert warm_up_mode(["cuda:1"]) == "forward"
