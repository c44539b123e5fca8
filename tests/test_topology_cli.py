"""`dfl-topology` as a user runs it: its real entry point on each invalid file, and the shipped
files in a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from tests.harness import Exited
from topologies.cli import main

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

NODES3 = "nodes: [{id: 0}, {id: 1}, {id: 2}]\n"

# case -> (file content, or None for no file; substrings the one stderr line must contain)
INVALID: dict[str, tuple[str | bytes | None, tuple[str, ...]]] = {
    "malformed-yaml": ("nodes: [{id: 0}\nedges: [[0, 1]\n", ("malformed YAML: line",)),
    "duplicate-yaml-key": (
        "nodes:\n  - {id: 0, port: 9000, port: 9001}\n",
        ("malformed YAML: line 2", "duplicate key 'port'"),
    ),
    "empty-file": ("", ("empty file",)),
    "comments-only": ("# nothing here\n\n", ("empty file",)),
    "binary": (b"\x7fELF\x02\x01\x01\x00\x00\x00", ("not a text file",)),
    "not-utf8": (b"nodes:\n  - {id: 0, owner: caf\xe9}\n", ("not UTF-8", "0xe9")),
    "top-level-list": ("- {id: 0}\n", ("top level must be a mapping",)),
    "unknown-top-key": (NODES3 + "edge: [[0, 1]]\n", ("edge: unknown key (did you mean edges?)",)),
    "unknown-edge-key": (
        NODES3 + "edges: [{u: 0, v: 1, latency: 5}, [1, 2]]\n",
        ("edges[0].latency: unknown key (did you mean latency_ms?)",),
    ),
    "no-nodes": ("nodes: []\n", ("nodes: no nodes",)),
    "nodes-missing": ("edges: []\n", ("nodes: field required",)),
    "id-missing": ("nodes: [{id: 0}, {host: a}]\n", ("nodes[1].id: field required",)),
    "id-not-integer": ("nodes: [{id: a}]\n", ("nodes[0].id: must be a non-negative integer",)),
    "id-negative": ("nodes: [{id: -1}]\n", ("nodes[0].id: must be a non-negative integer",)),
    "id-duplicate": (
        "nodes: [{id: 0}, {id: 1}, {id: 1}]\nedges: [[0, 1]]\n",
        ("nodes[2] (id 1): id: duplicate node id (also nodes[1])",),
    ),
    "edge-not-pair": (NODES3 + "edges: [[0, 1, 2]]\n", ("edges[0]: must be a pair",)),
    "edge-scalar": (NODES3 + "edges: [7]\n", ("edges[0]: must be a pair",)),
    "edge-mapping-no-v": (NODES3 + "edges: [{u: 0}]\n", ("edges[0].v: field required",)),
    "edge-end-not-int": (
        NODES3 + "edges: [[0, x]]\n",
        ("edges[0].v: must be a node id (an integer), got 'x'",),
    ),
    "edge-unknown-node": (
        NODES3 + "edges: [[0, 1], [1, 2], [2, 9]]\n",
        ("edges[2] (2, 9): v: node 9 is not in nodes",),
    ),
    "self-loop": (NODES3 + "edges: [[0, 1], [1, 1]]\n", ("edges[1] (1, 1): self-loop",)),
    "duplicate-edge-reversed": (
        NODES3 + "edges: [[0, 1], [1, 2], [1, 0]]\n",
        ("edges[2] (1, 0): duplicate edge (same as edges[0] (0, 1))",),
    ),
    "disconnected": (
        "nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}, {id: 4}, {id: 5}]\n"
        "edges: [[0, 1], [1, 2], [3, 4]]\n",
        ("edges: graph is disconnected: 3 components of sizes 3, 2, 1",),
    ),
    "port-string": (
        "nodes: [{id: 0}, {id: 5}, {id: 7, port: abc}]\nedges: [[0, 5], [5, 7]]\n",
        ("nodes[2].port: must be an integer in 1..65535, got 'abc'",),
    ),
    "port-out-of-range": (
        "nodes: [{id: 0, port: 70000}]\n",
        ("nodes[0].port: must be an integer in 1..65535, got 70000",),
    ),
    "port-zero": ("nodes: [{id: 0, port: 0}]\n", ("nodes[0].port: must be an integer",)),
    "same-default-host-port": (
        "nodes: [{id: 0, port: 9000}, {id: 1, port: 9000}]\nedges: [[0, 1]]\n",
        ("nodes[1] (id 1): port: 127.0.0.1:9000 is already used by nodes[0] (id 0)",),
    ),
    "same-host-port": (
        "nodes: [{id: 0, host: h1, port: 9000}, {id: 1, host: h2, port: 9000},\n"
        "        {id: 2, host: h1, port: 9000}]\nedges: [[0, 1], [1, 2]]\n",
        ("nodes[2] (id 2): port: h1:9000 is already used by nodes[0] (id 0)",),
    ),
    "device-gpu": (
        "nodes: [{id: 0, device: gpu}]\n",
        ("nodes[0].device: must be cpu, cuda, cuda:K or auto, got 'gpu'",),
    ),
    "device-cuda-x": ("nodes: [{id: 0, device: 'cuda:x'}]\n", ("nodes[0].device:",)),
    "latency-negative": (
        NODES3 + "edges: [[0, 1], {u: 1, v: 2, latency_ms: -5}]\n",
        ("edges[1].latency_ms: must be a non-negative number, got -5",),
    ),
    "bandwidth-not-numeric": (
        NODES3 + "edges: [[0, 1], {u: 1, v: 2, bandwidth_mbps: fast}]\n",
        ("edges[1].bandwidth_mbps: must be a positive number, got 'fast'",),
    ),
    "loss-one": (
        NODES3 + "edges: [[0, 1], {u: 2, v: 1, loss: 1.0}]\n",
        ("edges[1].loss: must be a number in [0, 1), got 1.0",),
    ),
    "weight-negative": (
        NODES3 + "edges: [{u: 0, v: 1, weight: -0.5}, [1, 2]]\n",
        ("edges[0].weight: must be a positive number, got -0.5",),
    ),
    "position-1d": (
        "nodes: [{id: 0, position: [0.5]}]\n",
        ("nodes[0].position: must be a list of 2 or 3 finite numbers",),
    ),
    "position-mixed-dims": (
        "nodes: [{id: 0, position: [0, 0]}, {id: 1, position: [1, 1, 1]}]\nedges: [[0, 1]]\n",
        ("nodes[1] (id 1): position: has 3 coordinates but nodes[0] (id 0) has 2",),
    ),
    "generator-not-mapping": (
        "generator: ring\nnodes: [{id: 0}]\n",
        ("generator: must be a mapping",),
    ),
    "missing-file": (None, ("no such file",)),
}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "topologies.cli", *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=ROOT,
        timeout=60,
    )


@pytest.mark.parametrize("case", INVALID)
def test_invalid_file_is_one_stderr_line_and_exit_2(case: str, tmp_path: Path,
                                                    entry: Callable[..., Exited]) -> None:
    content = INVALID[case][0]
    path = tmp_path / f"{case}.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    done = entry("dfl-topology", "show", str(path))
    assert done.code == 2, done.err
    assert done.out == ""
    assert "Traceback" not in done.err
    lines = done.err.splitlines()
    assert len(lines) == 1, done.err
    assert lines[0].startswith(f"dfl-topology: {path}: ")
    for expected in INVALID[case][1]:
        assert expected in lines[0]


def show(name: str) -> dict[str, str]:
    proc = run_cli("show", name)
    assert proc.returncode == 0, proc.stderr
    return dict(line.split(": ", 1) for line in proc.stdout.splitlines())


def test_er20_p05_has_95_edges_and_diameter_2() -> None:
    info = show("topologies/er20-p05.yaml")
    assert (info["nodes"], info["edges"], info["diameter"]) == ("20", "95", "2")


def test_rgg20_r04_has_60_edges_and_diameter_4() -> None:
    info = show("topologies/rgg20-r04.yaml")
    assert (info["nodes"], info["edges"], info["diameter"]) == ("20", "60", "4")
    assert "radius: 0.4" in info["generator"]


def test_er30_is_connected_and_says_how_it_was_repaired() -> None:
    info = show("er30")  # a bare shipped name
    assert info["nodes"] == "30"
    assert info["file"] == str(ROOT / "topologies" / "er30.yaml")
    generator = yaml.safe_load(info["generator"])
    assert generator["params"] == {"n": 30, "p": 0.1, "repair": "bridge"}
    added = generator["repair"]["added_edges"]
    assert generator["repair"]["method"] == "bridge" and len(added) >= 1
    assert int(info["diameter"]) > 0  # a diameter exists only for a connected graph
    assert float(info["algebraic connectivity"]) > 1e-9


def test_show_reports_degrees_and_metropolis_spectrum_of_the_ring() -> None:
    info = show("ring20")
    assert info["degree"] == "min 2, mean 2, max 2"
    # Metropolis on a ring is 1/3 everywhere: eigenvalues (1 + 2 cos(2 pi k / 20)) / 3.
    assert float(info["metropolis"].split("slem ")[1].split(",")[0]) == pytest.approx(
        (1 + 2 * 0.9510565163) / 3, abs=1e-6
    )


def test_show_json_is_one_object() -> None:
    proc = run_cli("show", "complete10", "--json")
    data = json.loads(proc.stdout)
    assert (data["nodes"], data["edges"], data["diameter"]) == (10, 45, 1)
    assert data["degree"] == {"min": 9, "mean": 9.0, "max": 9}


def invoke(*args: str) -> Result:
    """In-process run of the same click group (no interpreter start-up per case)."""
    return CliRunner().invoke(main, list(args))


def test_generate_writes_a_file_that_show_reads(tmp_path: Path) -> None:
    out = tmp_path / "ws.yaml"
    args = ["generate", "ws", "--p", "0.1", "-n", "16", "--k", "4", "--seed", "3", "-o", str(out)]
    result = invoke(*args)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"wrote {out}: 16 nodes,")
    info = show(str(out))
    assert info["name"] == "ws"
    assert yaml.safe_load(info["generator"])["params"]["k"] == 4
    assert out.read_text().startswith(
        "# Generated by: dfl-topology generate watts-strogatz -n 16 --k 4 --p 0.1 --seed 3\n"
    )


def test_generate_without_output_prints_the_yaml() -> None:
    result = invoke("generate", "grid", "--rows", "2", "--cols", "3")
    assert result.exit_code == 0
    data = yaml.safe_load(result.stdout)
    assert data["name"] == "grid"
    assert data["edges"] == [[0, 1], [0, 3], [1, 2], [1, 4], [2, 5], [3, 4], [4, 5]]


def test_generate_reproduces_a_shipped_file() -> None:
    result = invoke("generate", "rgg", "-n", "10", "--radius", "0.05", "--grow", "--name", "rgg10")
    header, _, body = result.stdout.partition("\n")
    assert (
        header
        == "# Generated by: dfl-topology generate random-geometric -n 10 --radius 0.05 --grow"
    )
    shipped = (ROOT / "topologies" / "rgg10.yaml").read_text(encoding="utf-8")
    assert body == shipped.partition("\n")[2]


def test_help_exits_0() -> None:
    result = invoke("generate", "--help")
    assert result.exit_code == 0 and "--repair" in result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["generate", "ring", "--radius", "0.3", "-n", "5"], "ring: --radius does not apply"),
        (["generate", "grid", "--rows", "3"], "generate grid: missing --cols"),
        (["generate", "er", "-n", "5", "--p", "2"], "erdos-renyi: p must be in [0, 1], got 2.0"),
        (["generate", "er", "-n", "5", "--p", "0.5", "--repair", "x"], "'--repair'"),
        (
            ["generate", "er", "-n", "9", "--p", "0", "--repair", "resample", "--max-tries", "3"],
            "erdos-renyi: no connected draw in 3 draws",
        ),
        (["generate", "hexagon", "-n", "5"], "'hexagon' is not one of"),
        (["generate", "ring", "-n", "five"], "'five' is not a valid integer"),
        (["generate", "ring", "-n", "5", "-o", "/nonexistent-dir/x.yaml"], "cannot write"),
        (["show"], "Missing argument"),
        (["show", "ring21"], "ring21: no such file, and no shipped topology (shipped: "),
        (["frobnicate"], "No such command"),
    ],
)
def test_bad_options_are_one_stderr_line_and_exit_2(args: list[str], expected: str) -> None:
    result = invoke(*args)
    assert (result.exit_code, result.stdout) == (2, "")
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("dfl-topology: ")
    assert expected in result.stderr
