"""`dfl-launch compose`: every generated compose file passes `docker-compose config -q`, names
the services the plan needs, and carries the plan and its data. (tests/test_compose_engine.py
runs such a mesh on a real engine.)"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dfl_node.learning.datacache import read_meta
from dfl_node.plan import RunPlan
from launcher.backends.compose import ComposeOptions, compose_file, write_compose
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from tests.harness import ENV_ROOT, ROOT

SYNTHETIC = {"dataset": "synthetic", "rounds": 2}


def compose_cli() -> str:
    """The docker-compose binary; CI must have it (fail), elsewhere its absence skips."""
    found = shutil.which("docker-compose")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("docker-compose is not installed (apt-get install docker-compose)")
        pytest.skip("docker-compose is not installed")
    return found


def services(path: Path) -> list[str]:
    """The services of a compose file as docker-compose reads it, after it validated."""
    cmd = [compose_cli(), "-f", str(path)]
    check = subprocess.run([*cmd, "config", "-q"], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr
    listed = subprocess.run([*cmd, "config", "--services"], capture_output=True, text=True,
                            timeout=60, check=True)
    return sorted(listed.stdout.split())


def make(out: Path, topology: str, protocol: str, **options: object) -> Path:
    return write_compose(RunSpec(topology=topology, protocol=protocol,
                                 options=options), ComposeOptions(out))


def test_ring20_names_twenty_nodes_and_the_collector(tmp_path: Path) -> None:
    path = make(tmp_path, "ring20", "d-psgd")  # the protocol's default data: Fashion-MNIST
    assert services(path) == sorted([*(f"node-{i}" for i in range(20)), "collector"])
    plan = RunPlan.load(tmp_path / "run" / "plan.json")
    assert [(n.host, n.address) for n in plan.nodes] == [
        (f"node-{i}", f"tcp://node-{i}:7000") for i in range(20)]
    assert plan.collector == "tcp://collector:7100"
    doc = yaml.safe_load(path.read_text())
    assert doc["services"]["node-3"]["command"] == [
        "dfl-node", "--plan", "/mesh/run/plan.json", "--node-id", "3", "--out", "/mesh/run"]
    assert doc["networks"]["mesh"]["ipam"]["config"] == [{"subnet": "172.29.13.0/24"}]
    exported = read_meta(tmp_path / "data" / Path(str(plan.data.cache_dir)).name)
    assert exported is not None and exported.fingerprint == plan.data.fingerprint


@pytest.mark.parametrize(("protocol", "extra"), [("ssd-fl", "coordinator"),
                                                 ("qffl", "aggregator")])
def test_services_beside_the_nodes(tmp_path: Path, protocol: str, extra: str) -> None:
    path = make(tmp_path, "complete10", protocol)
    assert services(path) == sorted([*(f"node-{i}" for i in range(10)), "collector", extra])
    command = yaml.safe_load(path.read_text())["services"][extra]["command"]
    expected = (["dfl-node", "--coordinator"] if extra == "coordinator"
                else ["dfl-node", "--plan", "/mesh/run/plan.json", "--node-id", "10"])
    assert command[:len(expected)] == expected


def test_a_gpu_node_reserves_its_gpu(tmp_path: Path) -> None:
    make(tmp_path, "ring20", "d-psgd", **SYNTHETIC)
    plan = RunPlan.load(tmp_path / "run" / "plan.json")
    plan = dataclasses.replace(plan, nodes=(dataclasses.replace(plan.nodes[0], device="cuda:2"),
                                            *plan.nodes[1:]))
    doc = compose_file(plan, "dfl-mesh", "10.9.8.0/24")
    path = tmp_path / "gpu.yml"
    path.write_text(yaml.safe_dump(doc))
    assert len(services(path)) == 21
    gpu = doc["services"]["node-0"]
    assert gpu["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "device_ids": ["2"], "capabilities": ["gpu"]}]
    assert gpu["environment"]["DFL_MESH_DEVICE"] == "cuda:0"
    assert "deploy" not in doc["services"]["node-1"]


def test_same_directory_same_plan_or_refused(tmp_path: Path) -> None:
    first = make(tmp_path, "ring20", "d-psgd", **SYNTHETIC).read_text()
    assert make(tmp_path, "ring20", "d-psgd", **SYNTHETIC).read_text() == first
    with pytest.raises(LaunchError, match="another run's plan"):
        make(tmp_path, "ring20", "d-psgd", **{**SYNTHETIC, "rounds": 3})


def test_bad_subnet_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "launcher.cli", "compose", "--topology", "ring20", "--protocol",
         "d-psgd", "--subnet", "10.0.0.0/30", "-o", str(tmp_path / "mesh")],
        env=ENV_ROOT, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("dfl-launch: --subnet: 10.0.0.0/30 is too small for a mesh "
                           "(at most /29)\n")
    assert not (tmp_path / "mesh").exists()


def test_inproc_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="--transport: dfl-node runs over zmq"):
        make(tmp_path, "ring20", "d-psgd", transport="inproc", **SYNTHETIC)
    assert list(tmp_path.iterdir()) == []
