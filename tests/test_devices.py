"""Device placement, checked on any machine: a node's model lands on the device its topology
entry names (`cpu`, or `auto` resolved to the GPUs the launcher sees), and a GPU that is not
there is one clear line of bad input before any node starts. The GPU side itself is measured by
bench/gpu.py on a machine that has one."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import dfl_node.runner.run_node
from dfl_node.learning.torch_settings import check_runtime
from launcher.cli import cli
from launcher.config.devices import resolve_devices
from launcher.errors import LaunchError
from tests.harness import Exited

TWO_NODES = "nodes: [{{id: 0, device: {a}}}, {{id: 1, device: {b}}}]\nedges: [[0, 1]]\n"


def test_cuda_0_on_a_machine_without_cuda_names_the_node_and_the_count() -> None:
    with pytest.raises(LaunchError) as err:
        resolve_devices([(0, "cpu"), (1, "cuda:0")], gpus=0)
    assert str(err.value) == "node 1: device 'cuda:0' does not exist (0 CUDA device(s) visible)"
    assert resolve_devices([(0, "auto"), (1, "cpu")], gpus=0) == ["cpu", "cpu"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a cuda:0")
def test_launching_on_cuda_0_without_cuda_is_one_line_exit_2(
    tmp_path: Path, entry: Callable[..., Exited]
) -> None:
    topo = tmp_path / "gpu.yaml"
    topo.write_text(TWO_NODES.format(a="'cuda:0'", b="cpu"))
    done = entry("dfl-launch", "plan", "--topology", str(topo), "--protocol", "d-psgd", "-o",
                 str(tmp_path / "plan.json"))
    assert done.code == 2 and done.out == ""
    assert done.err.strip() == ("dfl-launch: node 0: device 'cuda:0' does not exist "
                                "(0 CUDA device(s) visible)")
    assert not (tmp_path / "plan.json").exists()


def test_a_node_builds_its_model_on_its_planned_device(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Run both nodes (inproc: the node code the processes run) and look at each model's
    parameters as the protocol receives them."""
    seen: dict[int, tuple[str, set[str]]] = {}
    real = dfl_node.runner.run_node.NodeContext

    def recording(node_id: int, plan: Any, comm: Any, model: torch.nn.Module, *rest: Any,
                  **named: Any) -> Any:
        seen[node_id] = (str(rest[1]), {str(p.device) for p in model.parameters()})
        return real(node_id, plan, comm, model, *rest, **named)

    monkeypatch.setattr(dfl_node.runner.run_node, "NodeContext", recording)
    topo = tmp_path / "t.yaml"
    topo.write_text(TWO_NODES.format(a="cpu", b="auto"))
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as done:
        cli.main(["--topology", str(topo), "--protocol", "d-psgd", "--transport", "inproc",
                  "--rounds", "1", "--quiet", "--no-plots", "--out", str(run)],
                 standalone_mode=False)
    assert done.value.code == 0
    auto = "cuda:0" if torch.cuda.is_available() else "cpu"
    assert seen == {0: ("cpu", {"cpu"}), 1: (auto, {auto})}
    nodes = json.loads((run / "summary.json").read_text())["nodes"]
    assert [n["device"] for n in nodes] == ["cpu", auto]


@pytest.mark.parametrize(("hyper", "needle"), [
    ({"deterministic": "yes"}, "deterministic: input should be a valid boolean"),
    ({"torch_threads": 0}, "torch_threads: must be a positive integer, got 0"),
])
def test_runtime_settings_are_checked(hyper: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        check_runtime(hyper)
    check_runtime({"deterministic": True, "torch_threads": 2})
