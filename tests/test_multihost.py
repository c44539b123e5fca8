"""One node per host, on loopback: the host's own plan, plan agreement, the off-launcher
coordinator and `dfl-launch collect`. (tests/test_multihost_netns.py runs the mesh across
separate network stacks.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dfl_node.learning.datacache import DataError
from dfl_node.learning.datasets import load_arrays
from dfl_node.plan import RunPlan
from dfl_node.runner.results_seal import new_results_key
from launcher.config.host_plan import resolve_host_plan
from launcher.config.keys import RESULTS_KEY
from launcher.config.ports import PortClaims
from launcher.config.run_spec import RunSpec
from launcher.data.prepare import ensure_host_data
from launcher.errors import LaunchError
from tests.harness import ENV_ROOT, ROOT, final_files, launch_ok
from tests.proc_util import listening, wait_for

SYNTHETIC = ("--dataset", "synthetic", "--rounds", "2")


@pytest.fixture
def ports(port_claims: PortClaims) -> list[int]:
    return port_claims.claim(8)


def topology(tmp_path: Path, ports: list[int], count: int) -> Path:
    """A ring of `count` loopback nodes on fixed ports (a chord 0-2 when count > 3; two
    nodes: one edge)."""
    edges = [[i, (i + 1) % count] for i in range(count if count > 2 else 1)]
    edges += [[0, 2]] if count > 3 else []
    nodes = [{"id": i, "host": "127.0.0.1", "port": ports[i]} for i in range(count)]
    path = tmp_path / "mesh.yaml"
    path.write_text(json.dumps({"name": f"mesh{count}", "nodes": nodes, "edges": edges}))
    return path


def dfl_node(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "launcher.node_cli", *args], env=ENV_ROOT,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def results_keys(tmp_path: Path) -> Path:
    """A key directory with only the run's results key (`dfl-launch keys` makes one with the
    CURVE keys too): what hosts that each resolve the plan from `--topology` share."""
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / RESULTS_KEY).write_text(new_results_key() + "\n")
    return keys


def request(topo: Path, *sets: str, **options: object) -> RunSpec:
    return RunSpec(topology=str(topo), protocol="d-psgd",
                   options={"dataset": "synthetic", **options}, sets=sets)


def test_every_host_resolves_the_launchers_plan(tmp_path: Path, ports: list[int]) -> None:
    topo = topology(tmp_path, ports, 3)
    collector = f"endpoints.collector=10.1.2.3:{ports[7]}"
    keys = str(results_keys(tmp_path))  # else each resolution draws a results key of its own
    mine, theirs = resolve_host_plan(request(topo, collector, keys=keys)), resolve_host_plan(
        request(topo, collector, keys=keys))
    assert mine.to_dict() == theirs.to_dict()
    assert mine.collector == f"tcp://10.1.2.3:{ports[7]}"
    assert resolve_host_plan(request(topo, collector)).results_key != mine.results_key
    proc = subprocess.run([sys.executable, "-m", "launcher.cli", "plan", "--topology", str(topo),
                           "--protocol", "d-psgd", "--dataset", "synthetic", "--set", collector,
                           "--keys", keys, "-o", str(tmp_path / "plan.json")], env=ENV_ROOT,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert RunPlan.load(tmp_path / "plan.json").to_dict() == mine.to_dict()


@pytest.mark.parametrize(("protocol", "sets", "count", "needle"), [
    ("d-psgd", (), None, "endpoints.collector: one node per host needs its host:port"),
    ("ssd-fl", ("endpoints.collector=h:1",), None, "endpoints.coordinator"),
    ("qffl", ("endpoints.collector=h:1",), None, "endpoints.aggregator"),
    ("d-psgd", ("endpoints.collector=h",), None, "endpoints.collector: expected host:port"),
    ("d-psgd", ("endpoints.collector=h:1",), "ring20", "nodes [0, 1, 2"),
])
def test_a_host_plan_with_a_port_left_open_is_refused(
        tmp_path: Path, ports: list[int], protocol: str, sets: tuple[str, ...],
        count: str | None, needle: str) -> None:
    topo = count or str(topology(tmp_path, ports, 3))
    with pytest.raises(LaunchError) as err:
        resolve_host_plan(RunSpec(topology=str(topo), protocol=protocol,
                                  options={"dataset": "synthetic"}, sets=sets))
    assert needle in str(err.value)


def test_where_a_host_keeps_the_data_is_not_part_of_the_plan(tmp_path: Path,
                                                            ports: list[int]) -> None:
    plan = resolve_host_plan(request(topology(tmp_path, ports, 3), "endpoints.collector=h:1"))
    data = plan.to_dict()["data"]
    moved = RunPlan.from_dict({**plan.to_dict(), "data": {
        **data, "cache_dir": "/elsewhere/fmnist-0123", "data_root": "/mnt/data"}})
    other = RunPlan.from_dict({**plan.to_dict(), "data": {**data, "partition": "shards:2"}})
    assert moved.section_hashes() == plan.section_hashes()
    differ = [k for k, v in other.section_hashes().items() if plan.section_hashes()[k] != v]
    assert differ == ["data"]


@pytest.mark.parametrize(("args", "needle"), [
    (["--node-id", "0", "--plan", "p.json", "--rounds", "3"], "--rounds: the plan fixes it"),
    (["--node-id", "0"], "give --plan PLAN, or --topology T --protocol P"),
    (["--plan", "p.json"], "exactly one of --node-id I and --coordinator"),
    (["--coordinator", "--plan", "p.json"], "protocol d-psgd has no pre-phase"),
])
def test_bad_dfl_node_input_is_one_line_and_exit_2(tmp_path: Path, ports: list[int],
                                                   args: list[str], needle: str) -> None:
    resolve_host_plan(request(topology(tmp_path, ports, 2), "endpoints.collector=h:1")).dump(
        tmp_path / "p.json")
    proc = subprocess.run([sys.executable, "-m", "launcher.node_cli", *args], env=ENV_ROOT,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("dfl-node: ") and needle in lines[0]


def test_two_nodes_with_different_configs_refuse_naming_the_section(
        tmp_path: Path, ports: list[int]) -> None:
    """Started by hand with another --rounds each: both stop, naming `protocol`, exit 2."""
    topo = topology(tmp_path, ports, 2)
    common = ["--topology", str(topo), "--protocol", "d-psgd", *SYNTHETIC[:2],
              "--set", f"endpoints.collector=127.0.0.1:{ports[7]}",
              "--set", "wire.rendezvous_s=60", "--keys", str(results_keys(tmp_path))]
    procs = [dfl_node(*common, "--node-id", str(i), "--rounds", str(i + 1), "--out",
                      str(tmp_path / f"host{i}")) for i in (0, 1)]
    errors = [p.communicate(timeout=120)[1].strip().splitlines() for p in procs]
    assert [p.returncode for p in procs] == [2, 2]
    assert errors == [[f"dfl-node: node {i}: node {1 - i}'s plan differs in ['protocol']; "
                       "refusing to start"] for i in (0, 1)]
    assert not list(tmp_path.glob("host*/final/*"))


def test_collect_without_a_mesh_gives_up_at_its_timeout(tmp_path: Path, ports: list[int]) -> None:
    plan = resolve_host_plan(request(topology(tmp_path, ports, 2),
                                     f"endpoints.collector=127.0.0.1:{ports[7]}"))
    plan.dump(tmp_path / "plan.json")
    proc = subprocess.run([sys.executable, "-m", "launcher.cli", "collect", "--plan",
                           str(tmp_path / "plan.json"), "--out", str(tmp_path / "run"),
                           "--timeout-s", "1"], env=ENV_ROOT, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    assert "no result from nodes [0, 1] within 1 s" in proc.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["status"], summary["failed_node"], summary["avg_accuracy"]) == (
        "failed", 0, None)


@pytest.mark.slow
def test_off_launcher_coordinator_and_collector_equal_the_launchers_inproc_run(
        tmp_path: Path, ports: list[int]) -> None:
    """SSD-FL on 4 hand-started nodes: the coordinator starts after them, and the collector
    after their run has ended (each node waits for it as long as for the mesh to start)."""
    topo = topology(tmp_path, ports, 4)
    options = ["--dataset", "synthetic", "--partition", "iid", "--rounds", "2",
               "--set", "model={name: mlp}", "--set", "local_steps=1",
               "--set", "sample_size=20", "--set", "wire.rendezvous_s=120",
               "--set", f"endpoints.collector=127.0.0.1:{ports[6]}",
               "--set", f"endpoints.coordinator=127.0.0.1:{ports[7]}"]
    run = tmp_path / "run"
    plan_cmd = [sys.executable, "-m", "launcher.cli", "plan", "--topology", str(topo),
                "--protocol", "ssd-fl", *options, "-o", str(run / "plan.json")]
    assert subprocess.run(plan_cmd, env=ENV_ROOT, cwd=ROOT, timeout=120).returncode == 0
    plan = str(run / "plan.json")
    procs = [dfl_node("--plan", plan, "--node-id", str(i)) for i in (3, 1, 0, 2)]
    wait_for(lambda: all(listening(port) for port in ports[:4]), 120, "the nodes listening")
    procs.append(dfl_node("--coordinator", "--plan", plan, "--out", str(tmp_path / "coord")))
    wait_for(lambda: all(ended(run / "records" / f"node-{i}.jsonl") for i in range(4)), 200,
             "every node's run ended")
    collect = subprocess.run([sys.executable, "-m", "launcher.cli", "collect", "--plan", plan,
                              "--out", str(tmp_path / "collected"), "--timeout-s", "300"],
                             env=ENV_ROOT, cwd=ROOT, capture_output=True, text=True, timeout=400)
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 5, outputs
    assert collect.returncode == 0, collect.stderr
    reference = launch_ok(tmp_path / "inproc", str(topo), "ssd-fl", "--transport", "inproc",
                          *options)
    assert final_files(run) == final_files(tmp_path / "inproc")
    mine = json.loads((tmp_path / "coord" / "prephase.json").read_text())
    theirs = json.loads((tmp_path / "inproc" / "prephase.json").read_text())
    assert {k: v for k, v in mine.items() if k not in ("plan_hashes", "traffic")} == {
        k: v for k, v in theirs.items() if k not in ("plan_hashes", "traffic")}
    collected = json.loads((tmp_path / "collected" / "summary.json").read_text())
    assert [n["accuracy"] for n in collected["nodes"]] == [
        n["accuracy"] for n in reference["nodes"]]


def ended(records: Path) -> bool:
    """Whether a hand-started node's kept records (records/node-<id>.jsonl) hold its `done`."""
    text = records.read_text() if records.exists() else ""
    whole = text.endswith("\n")  # else its last line is still being written
    return whole and json.loads(text.splitlines()[-1])["type"] == "done"


def test_a_host_without_the_prepared_data_decodes_its_own_copy(
        tmp_path: Path, ports: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    planned = resolve_host_plan(RunSpec(topology=str(topology(tmp_path, ports, 2)),
                                        protocol="d-psgd", options={"dataset": "fmnist"},
                                        sets=("endpoints.collector=h:1",)))
    data = planned.to_dict()["data"]
    elsewhere = {**data, "cache_dir": f"/elsewhere/{Path(data['cache_dir']).name}"}
    plan = RunPlan.from_dict({**planned.to_dict(), "data": elsewhere})
    monkeypatch.setenv("DFL_MESH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DataError):
        load_arrays(plan.data)
    ensure_host_data(plan, None)
    assert (tmp_path / "cache" / Path(elsewhere["cache_dir"]).name / "meta.json").exists()
    assert load_arrays(plan.data).y_train.shape == (60000,)
    forged = RunPlan.from_dict({**plan.to_dict(), "data": {**elsewhere, "fingerprint": "0" * 64}})
    with pytest.raises(LaunchError, match=r"this host's files .* are not the plan's"):
        ensure_host_data(forged, None)
