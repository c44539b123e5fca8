"""Limits checked before anything starts, on inputs too large for the bad-input catalogue's
table (tests/test_bad_input.py holds the small ones): each is one line and exit 2, and the run
directory is never made, so no node ran and nothing was written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from dfl_config.problems import one_line
from dfl_config.section import Number, Section
from launcher.config.capacity import NODE_PROCESS_BYTES, available_memory
from launcher.config.ports import PortClaims
from protocols.hyper import ProtocolHyper
from tests.harness import Exited

RUN = ("--protocol", "d-psgd", "--dataset", "synthetic", "--rounds", "1")
TRI = "nodes: [{id: 0}, {id: 1}, {id: 2}]\nedges: [[0, 1], [1, 2], [2, 0]]\n"


def ring(path: Path, count: int, **node: object) -> Path:
    """A ring of `count` nodes as JSON (YAML's subset that is fastest to write and read);
    `node` keys go on every node, `port` counting up from its value."""
    nodes = [{"id": i, **node, **({"port": int(node["port"]) + i} if "port" in node else {})}
             for i in range(count)]
    path.write_text(json.dumps({"name": f"ring{count}", "nodes": nodes,
                                "edges": [[i, (i + 1) % count] for i in range(count)]}))
    return path


def refused(done: Exited, run: Path, *fragments: str) -> str:
    """The one line of a refusal, once its exit code, streams and fragments are checked."""
    assert (done.code, done.out) == (2, ""), done.err
    assert done.err.endswith("\n") and done.err.count("\n") == 1, done.err
    for fragment in fragments:
        assert fragment in done.err, (fragment, done.err)
    assert not run.exists()
    return done.err


def test_one_node_more_than_the_port_range_holds_is_refused(
        tmp_path: Path, entry: Callable[..., Exited]) -> None:
    """The port range's size in nodes, plus the collector's port: one port too many."""
    count = PortClaims.capacity()
    topology = ring(tmp_path / "ring.json", count)
    run = tmp_path / "run"
    refused(entry("dfl-launch", "--topology", str(topology), *RUN, "--out", str(run)), run,
            f"ring.json: {count} nodes need {count + 1} local ports, more than this machine's "
            f"port range holds ({count})")


@pytest.mark.slow
def test_a_ring_of_100000_nodes_is_refused_before_its_plan(
        tmp_path: Path, entry: Callable[..., Exited]) -> None:
    """Refused once the topology is read, before any port is claimed (before the limits: minutes
    of planning, then a 47-line OSError); the read itself is most of the time this takes."""
    topology = ring(tmp_path / "ring.json", 100_000)
    run = tmp_path / "run"
    line = refused(entry("dfl-launch", "--topology", str(topology), *RUN, "--out", str(run)),
                   run, "ring.json: 100000 nodes need 100001 local ports")
    assert "more than this machine's port range holds" in line


def test_more_node_processes_than_memory_are_refused(
        tmp_path: Path, entry: Callable[..., Exited]) -> None:
    """Twice as many node processes (on fixed ports: none to claim) as this machine's
    available memory holds at the least a node process takes."""
    available = available_memory()
    if available is None:
        pytest.skip("/proc/meminfo says no MemAvailable")
    count = 2 * available // NODE_PROCESS_BYTES + 1
    if count > 40_000:
        pytest.skip(f"{count} nodes: more ports than one host has")
    topology = ring(tmp_path / "big.json", count, host="127.0.0.1", port=20_000)
    run = tmp_path / "run"
    refused(entry("dfl-launch", "--topology", str(topology), *RUN, "--out", str(run)), run,
            f"big.json: {count} node processes need at least",
            "more than this machine's available memory")


def test_a_fifty_megabyte_topology_name_is_refused_unread(
        tmp_path: Path, entry: Callable[..., Exited]) -> None:
    """main copied it into plan.json, summary.json and config.yaml (105 MB and 52 MB each)."""
    topology = tmp_path / "t.yaml"
    topology.write_text(f"name: {'x' * (50 << 20)}\n{TRI}")
    run = tmp_path / "run"
    refused(entry("dfl-launch", "--topology", str(topology), *RUN, "--out", str(run)), run,
            f"{topology}: a topology file of 50 MiB, more than one may hold (16 MiB)")


def test_a_config_file_above_the_limit_is_refused_unread(
        tmp_path: Path, entry: Callable[..., Exited]) -> None:
    (tmp_path / "t.yaml").write_text(TRI)
    config = tmp_path / "c.yaml"
    config.write_text(f"dataset: synthetic\n# {'x' * (17 << 20)}\n")
    run = tmp_path / "run"
    refused(entry("dfl-launch", "--topology", str(tmp_path / "t.yaml"), *RUN, "--config",
                  str(config), "--out", str(run)), run,
            f"{config}: a config file of 17 MiB, more than one may hold (16 MiB)")


class Inner(Section):
    scale: Number = 1.0


class NestedHyper(ProtocolHyper):
    inner: Inner = Inner()
    steps: tuple[Number, ...] = ()


@pytest.mark.parametrize(("value", "where", "why"), [
    ({"inner": {"scale": 1e39}}, "hyper.inner: scale", "must fit float32"),
    ({"steps": [0.5, -1e300]}, "hyper.steps: [1]", "must fit float32"),
    ({"inner": {"scale": 1e-46}}, "hyper.inner: scale", "must not vanish in float32"),
])
def test_every_float_of_a_hyper_must_survive_float32(value: dict, where: str, why: str) -> None:
    """By type, at any depth: a plugin's protocol has the check without naming its fields."""
    with pytest.raises(ValidationError) as err:
        NestedHyper.model_validate(value)
    line = one_line(err.value, NestedHyper, ("hyper",))
    assert line.startswith(f"{where}: {why}"), line
    assert NestedHyper.model_validate({"inner": {"scale": 3.4e38}, "steps": [0.0, -2e-45]})
