"""One node per host, for real network stacks: every node in a Linux network namespace of its
own, the collector in another, joined by veth links on a bridge (tests/netns.py), tcp between
them. Nodes start with `dfl-node` in a shuffled order with delays, half from the plan file and
half resolving the plan themselves from the topology; the mesh must equal an inproc run of the
same plan bit for bit, and nothing of the lab may be left behind.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import netns
from tests.harness import ENV_ROOT, ROOT, final_files, launch_ok
from tests.test_multihost import results_keys

pytestmark = pytest.mark.slow

NODES = 5  # hosts 0..4 run nodes, host 5 the collector
PORT = 7000  # the same port on every host: each namespace has a stack of its own
COLLECTOR_PORT = 7100
WAIT_S = 600


@pytest.fixture(scope="module")
def lab() -> Iterator[netns.Lab]:
    reason = netns.unavailable()
    if reason:
        pytest.skip(reason)
    with netns.lab(NODES + 1) as made:
        yield made
    assert netns.leftovers(made.prefix) == [], "the lab was not removed"


def write_topology(tmp_path: Path, lab: netns.Lab) -> Path:
    """A ring of NODES with a chord, every node at its namespace's address."""
    nodes = [{"id": i, "host": lab.address(i), "port": PORT} for i in range(NODES)]
    edges = [[i, (i + 1) % NODES] for i in range(NODES)] + [[0, 2]]
    path = tmp_path / "lab.yaml"
    path.write_text(json.dumps({"name": "lab5", "nodes": nodes, "edges": edges}))
    return path


def python(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]


def start_in(lab: netns.Lab, host: int, argv: list[str], log: Path) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen([*lab.exec_prefix(host), *argv], env=ENV_ROOT, cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def tx_bytes(lab: netns.Lab, host: int) -> int:
    """Bytes sent on the host's veth link (its only way out)."""
    stats = json.loads(netns.ip("-s", "-j", "link", "show", "eth0", netns=lab.hosts[host]))
    return int(stats[0]["stats64"]["tx"]["bytes"])


def run_mesh(lab: netns.Lab, tmp_path: Path, protocol: str, topo: Path,
             options: list[str]) -> dict[str, int]:
    """Collector first, then every node in a shuffled order with delays; their exit codes."""
    plan = str(tmp_path / "plan" / "plan.json")
    procs: dict[str, subprocess.Popen] = {}
    order = random.sample(range(NODES), NODES)
    print(f"start order {order}")
    try:
        procs["collector"] = start_in(lab, NODES, python(
            "launcher.cli", "collect", "--plan", plan, "--out", str(tmp_path / "collected"),
            "--timeout-s", str(WAIT_S)), tmp_path / "collector.log")
        for i in order:
            time.sleep(random.uniform(0.5, 3.0))
            source = (["--plan", plan] if i % 2 == 0 else
                      ["--topology", str(topo), "--protocol", protocol, *options])
            procs[f"node-{i}"] = start_in(lab, i, python(
                "launcher.node_cli", *source, "--node-id", str(i), "--out",
                str(tmp_path / f"host-{i}")), tmp_path / f"node-{i}.log")
        deadline = time.monotonic() + WAIT_S
        for proc in procs.values():
            proc.wait(max(deadline - time.monotonic(), 1))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return {name: proc.returncode for name, proc in procs.items()}


@pytest.mark.parametrize("protocol", ["d-psgd", "dmfl-sq"])
def test_mesh_across_namespaces_equals_inproc(lab: netns.Lab, tmp_path: Path,
                                              protocol: str) -> None:
    topo = write_topology(tmp_path, lab)
    options = ["--rounds", "2", "--eval-every", "1", "--set", "wire.rendezvous_s=300",
               "--set", f"endpoints.collector={lab.address(NODES)}:{COLLECTOR_PORT}",
               "--keys", str(results_keys(tmp_path))]  # the --topology hosts' results key
    plan_path = tmp_path / "plan" / "plan.json"
    made = subprocess.run([*python("launcher.cli", "plan", "--topology", str(topo),
                                   "--protocol", protocol, *options, "-o", str(plan_path))],
                          env=ENV_ROOT, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    text = plan_path.read_text()
    assert "127.0.0.1" not in text and "localhost" not in text
    sent_before = sum(tx_bytes(lab, i) for i in range(NODES))

    codes = run_mesh(lab, tmp_path, protocol, topo, options)
    logs = {p.name: p.read_text()[-2000:] for p in tmp_path.glob("*.log")}
    assert set(codes.values()) == {0}, (codes, logs)

    reference = launch_ok(tmp_path / "inproc", str(topo), protocol, "--transport", "inproc",
                          *options)
    expected = final_files(tmp_path / "inproc")
    for i in range(NODES):
        name = f"node-{i}.safetensors"
        assert final_files(tmp_path / f"host-{i}")[name] == expected[name], name
    collected = json.loads((tmp_path / "collected" / "summary.json").read_text())
    assert [(n["id"], n["accuracy"], n["loss"]) for n in collected["nodes"]] == [
        (n["id"], n["accuracy"], n["loss"]) for n in reference["nodes"]]
    assert collected["wire_bytes"] == reference["wire_bytes"] > 0
    # The training traffic crossed the veth links (tcp framing comes on top).
    assert sum(tx_bytes(lab, i) for i in range(NODES)) - sent_before > collected["wire_bytes"]
