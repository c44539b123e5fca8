"""A compose mesh on a real docker engine equals an inproc run of the same plan, bit for bit.

A private dockerd (tests/dockerd.py) builds the node image from a debootstrapped Debian base
and this machine's CPU torch wheel, then the two commands of docs/containers.md run a 4-node
d-psgd mesh on Fashion-MNIST: `dfl-launch compose ... -o mesh` and
`docker-compose -f mesh/docker-compose.yml up`. The reference is
`dfl-launch --transport inproc` with the same options in the same image (the same torch
build). Afterwards the engine removes every container, network and image and stops; nothing
of it may remain.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.data.fashion_mnist import DEBIAN_DIR
from tests import dockerd, netns
from tests.harness import ENV_ROOT, ROOT, final_files

# A bound on hangs above the docker commands' own (a base image and a build: each up to
# DOCKER_TIMEOUT_S).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(7200)]

NODES = 4
OPTIONS = ("--protocol", "d-psgd", "--rounds", "2", "--set", "eval_size=500")
BASE, IMAGE = "dfl-base:test", "dfl-mesh:test"


def missing(reason: str) -> None:
    """CI must run this test: there a missing tool fails it; elsewhere it skips."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def engine() -> Iterator[dockerd.Engine]:
    reason = dockerd.unavailable() or (None if DEBIAN_DIR.exists() else
                                       f"{DEBIAN_DIR} missing (dataset-fashion-mnist)")
    if reason:
        missing(reason)
    with dockerd.engine() as made:
        yield made
    assert dockerd.leftovers(made) == [], "the engine left something behind"


def free_subnet() -> str:
    """A /24 the machine routes nowhere, for the mesh network's bridge."""
    used = netns.used_networks()
    for third in range(13, 250):
        net = ipaddress.IPv4Network(f"172.29.{third}.0/24")
        if not any(net.overlaps(u) for u in used):
            return str(net)
    raise RuntimeError("no free 172.29.x.0/24")


def write_topology(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ring4.yaml"
    nodes = [{"id": i} for i in range(NODES)]
    edges = [[i, (i + 1) % NODES] for i in range(NODES)]
    path.write_text(json.dumps({"name": "ring4", "nodes": nodes, "edges": edges}))
    return path


def compose_up(engine: dockerd.Engine, mesh: Path) -> dict[str, int]:
    """The second command of docs/containers.md; every container's exit code, by name. The
    containers and the network are removed (`down`) also when it fails."""
    compose = ("docker-compose", "-f", str(mesh / "docker-compose.yml"))
    try:
        engine.run(*compose, "up", cwd=mesh)
        ids = engine.run(*compose, "ps", "-q", cwd=mesh).split()
        rows = engine.run("docker", "inspect", "-f", "{{.Name}} {{.State.ExitCode}}", *ids)
        codes = {name.strip("/"): int(code) for name, code in map(str.split, rows.splitlines())}
        if set(codes.values()) != {0}:
            print(engine.run(*compose, "logs", "--no-color", cwd=mesh)[-6000:])
        return codes
    finally:
        engine.run(*compose, "down", cwd=mesh)


def inproc_in_image(engine: dockerd.Engine, mesh: Path, ref: Path, topo: Path) -> dict:
    """`dfl-launch --transport inproc` in the node image, on the mesh's prepared data."""
    engine.run("docker", "run", "--rm", "--network", "none",
               "-v", f"{mesh / 'data'}:/mesh/data:ro", "-e", "DFL_MESH_CACHE=/mesh/data",
               "-v", f"{DEBIAN_DIR}:{DEBIAN_DIR}:ro", "-v", f"{ref}:/ref", IMAGE,
               "dfl-launch", "--topology", f"/ref/{topo.name}", *OPTIONS,
               "--transport", "inproc", "--quiet", "--no-plots", "--out", "/ref/inproc")
    return json.loads((ref / "inproc" / "summary.json").read_text())


def test_compose_mesh_equals_inproc(engine: dockerd.Engine, tmp_path: Path) -> None:
    wheel = dockerd.torch_wheel()
    if wheel is None:
        missing("no CPU torch wheel for cp311 here (set DFL_MESH_TORCH_WHEEL)")
    dockerd.base_image(engine, BASE)
    dockerd.node_image(engine, BASE, IMAGE, wheel, tmp_path / "context")
    ref = tmp_path / "ref"
    topo = write_topology(ref)
    mesh = tmp_path / "mesh"

    made = subprocess.run(
        [sys.executable, "-m", "launcher.cli", "compose", "--topology", str(topo), *OPTIONS,
         "--image", IMAGE, "--subnet", free_subnet(), "-o", str(mesh)],
        env=ENV_ROOT, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    codes = compose_up(engine, mesh)
    assert codes == {f"mesh_{name}_1": 0 for name in
                     [*(f"node-{i}" for i in range(NODES)), "collector"]}

    collected = json.loads((mesh / "run" / "summary.json").read_text())
    reference = inproc_in_image(engine, mesh, ref, topo)
    assert final_files(mesh / "run") == final_files(ref / "inproc")
    assert len(final_files(mesh / "run")) == NODES
    assert [(n["id"], n["accuracy"], n["loss"]) for n in collected["nodes"]] == [
        (n["id"], n["accuracy"], n["loss"]) for n in reference["nodes"]]
    assert collected["wire_bytes"] == reference["wire_bytes"] > 0
    assert [n["host"] for n in collected["nodes"]] == [f"node-{i}" for i in range(NODES)]
