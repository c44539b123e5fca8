"""`dfl_mesh.run` with objects of the caller's own (issue 45, item 2): a protocol class defined
in a script's `__main__`, a networkx graph, a model factory and per-node arrays reach the
nodes by fork (zmq) and by shared memory (inproc) alike, to the same final parameters; the run
directory records what it can of them; a backend whose nodes start elsewhere refuses them in
one line, and so does `--resume` of such a run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest

from launcher.api.settings import keyword_spec
from launcher.errors import LaunchError

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "scripts" / "own_objects.py"
P = 8 * 16 + 16 + 16 * 3 + 3  # the script's small_net


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("own")
    done = subprocess.run([sys.executable, str(SCRIPT), str(out), "zmq", "inproc", "hosts"],
                          cwd=out, capture_output=True, text=True, timeout=300)
    return out, done


def test_zmq_and_inproc_end_with_the_same_final_files(
        runs: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, done = runs
    for transport in ("zmq", "inproc"):
        summary = json.loads((out / transport / "summary.json").read_text())
        assert summary["status"] == "ok", done.stderr[-3000:]
        assert (summary["transport"], summary["rounds"]) == (transport, 2)
    names = sorted(p.name for p in (out / "zmq" / "final").iterdir())
    assert names == [f"node-{i}.safetensors" for i in range(4)]
    for name in names:
        assert (out / "zmq" / "final" / name).read_bytes() == \
            (out / "inproc" / "final" / name).read_bytes(), name


def test_the_hosts_backend_refuses_the_objects_in_one_line(
        runs: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, done = runs
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "transport=hosts: the graph kite, the protocol class __main__.Diffusion, the model "
        "factory __main__.small_net, the dataset's arrays were handed over as Python objects, "
        "which only nodes this process starts can reach (zmq or inproc); hosts starts nodes "
        "from an installed package and files: give names and files instead"]
    assert not (out / "hosts").exists()


def test_the_run_directory_records_what_the_objects_are(
        runs: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    run = runs[0] / "zmq"
    plan = json.loads((run / "plan.json").read_text())
    assert plan["protocol"] == "__main__.Diffusion"
    assert plan["topology"]["name"] == "kite"
    assert sorted((e["u"], e["v"]) if isinstance(e, dict) else tuple(e)
                  for e in plan["topology"]["edges"]) == [(0, 1), (0, 2), (0, 3), (1, 2), (2, 3)]
    assert plan["model"]["factory"] == "__main__.small_net"
    assert plan["model"]["parameters"] == P
    assert plan["model"]["architecture"].startswith("Sequential(\n  (0): Linear(in_features=8")
    assert (plan["data"]["dataset"], plan["data"]["partition"]) == ("given", "given")
    assert plan["data"]["node_sizes"] == [48] * 4
    objects = json.loads((run / "inputs.json").read_text())["objects"]
    assert objects["protocol"] == "__main__.Diffusion"
    assert objects["topology"]["edges"] == [[0, 1], [0, 2], [0, 3], [1, 2], [2, 3]]
    assert objects["dataset"]["fingerprint"] == plan["data"]["fingerprint"]


def test_resume_of_a_run_of_objects_is_refused_in_one_line(
        runs: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    run = runs[0] / "inproc"
    done = subprocess.run([sys.executable, "-m", "launcher.cli", "--resume", str(run)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"dfl-launch: --resume {run}: the run was handed Python objects (dataset, model, "
        "protocol, topology), which its files do not hold; run it again with the same objects"]


def refusal(**given: Any) -> str:
    args = {"topology": "ring20", "protocol": "d-psgd", **given}
    topology, protocol = args.pop("topology"), args.pop("protocol")
    with pytest.raises(LaunchError) as caught:
        keyword_spec(topology, protocol, None, args, {})
    return str(caught.value)


def labelled(n: int, labels: Any = None) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((n, 2), np.float32), np.zeros(n, np.int64) if labels is None else labels


def test_objects_that_cannot_serve_are_refused_in_one_line() -> None:
    assert refusal(topology=nx.path_graph(["a", "b"])).startswith("topology=graph: ")
    assert refusal(topology=nx.Graph([(0, 1), (2, 3)])).startswith("topology=graph: ")
    assert refusal(protocol=dict) == (
        "protocol=: a protocol's name or a protocols.sdk.ProtocolNode subclass; got <class 'dict'>")
    assert refusal(model=lambda: 3).endswith(
        ".<lambda>: returned an object of type int, not a torch.nn.Module")
    assert refusal(dataset={"train": labelled(4)}).startswith("dataset=: a dataset's name, or ")
    assert refusal(dataset={"train": labelled(4, np.array([0.5] * 4)),
                            "test": labelled(2)}) == \
        "dataset=train: labels must be class indices (integers from 0)"


def test_a_torch_dataset_is_the_same_data_as_its_tensors() -> None:
    import torch
    from torch.utils.data import TensorDataset

    from launcher.api.objects import given_data
    from launcher.config.given import GivenData

    x, y = torch.arange(24, dtype=torch.float32).reshape(6, 2, 2), torch.tensor([0, 1, 2] * 2)
    pairs = given_data({"train": (x, y), "test": (x[:2], y[:2])})
    dataset = given_data({"train": TensorDataset(x, y), "test": TensorDataset(x[:2], y[:2])})
    assert pairs == dataset == GivenData(pairs.fingerprint, None, (2, 2), 3, 6, 2)
    per_node = given_data({"train": [(x[:4], y[:4]), (x[4:], y[4:])], "test": (x[:2], y[:2])})
    assert per_node.node_sizes == (4, 2) and per_node.fingerprint != pairs.fingerprint
    assert refusal(dataset={"train": x, "test": (x, y)}).startswith("dataset=train: an (x, y) pair")


def test_a_digraph_is_a_directed_topology_recorded_by_its_arcs() -> None:
    req = keyword_spec(nx.DiGraph([(1, 2), (2, 0), (0, 1)]), "d-psgd", None, {}, {})
    assert req.objects is not None and req.objects.topology is not None
    assert (req.topology, req.protocol, req.objects.topology.directed) == ("graph", "d-psgd", True)
    assert req.recorded()["objects"] == {"topology": {
        "name": "graph", "directed": True, "nodes": [0, 1, 2],
        "edges": [[0, 1], [1, 2], [2, 0]]}}
