"""Address discovery (`endpoints.nodes: discover`): nodes whose hosts and ports nobody knows in
advance learn each other's from the directory beside the collector, then run as any mesh.
Real processes and sockets on loopback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest
import zmq

from dfl_node.plan import RunPlan
from dfl_node.runner.discovery import DiscoveryError, discover, parse_table, reachable_address
from dfl_node.transports.zeromq import routing_id
from launcher.config.host_plan import resolve_host_plan
from launcher.config.ports import PortClaims
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from launcher.run.address_book import AddressBook
from tests.harness import ENV_ROOT, ROOT, final_files, in_process, launch_ok

OPTIONS = ("--dataset", "synthetic", "--rounds", "2", "--set", "wire.rendezvous_s=120")
DISCOVER = ("--set", "endpoints.nodes=discover")


def ring6(tmp_path: Path, **node: object) -> Path:
    """Six nodes on a ring with a chord, no host or port (`node`: keys for node 0)."""
    nodes = [{"id": i, **(node if i == 0 else {})} for i in range(6)]
    edges = [[i, (i + 1) % 6] for i in range(6)] + [[0, 3]]
    path = tmp_path / "ring6.yaml"
    path.write_text(json.dumps({"name": "ring6", "nodes": nodes, "edges": edges}))
    return path


def program(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", *args], env=ENV_ROOT, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def discover_plan(tmp_path: Path, *sets: str) -> RunPlan:
    plan = tmp_path / "run" / "plan.json"
    done = in_process("dfl-launch", "plan", "--topology", str(ring6(tmp_path)), "--protocol",
                      "d-psgd", *OPTIONS, *DISCOVER, *sets, "-o", str(plan))
    assert done.code == 0, done.err
    return RunPlan.load(plan)


def test_a_discover_plan_names_no_node_address_and_a_directory(tmp_path: Path) -> None:
    plan = discover_plan(tmp_path, "--set", "endpoints.collector=10.0.0.7:7100")
    assert {(n.address, n.host, n.bind) for n in plan.nodes} == {("", "", "tcp://0.0.0.0:*")}
    assert plan.collector == "tcp://10.0.0.7:7100"
    assert plan.discovery is not None
    assert plan.discovery.address.startswith("tcp://10.0.0.7:")
    assert plan.discovery.bind.startswith("tcp://0.0.0.0:")


def test_a_plan_with_fixed_addresses_hashes_as_before_discovery_existed(tmp_path: Path) -> None:
    plan = discover_plan(tmp_path)
    fixed = RunPlan.from_dict({**plan.to_dict(), "discovery": {}})
    body = fixed.to_dict()
    del body["discovery"]  # a plan file written before the key existed
    assert RunPlan.from_dict(body).section_hashes() == fixed.section_hashes()
    assert fixed.section_hashes()["runtime"] != plan.section_hashes()["runtime"]


def test_nodes_started_by_hand_discover_each_other_and_equal_the_inproc_run(
        tmp_path: Path) -> None:
    """Six dfl-node processes and dfl-launch collect from one discover plan: every node binds a
    port the OS picks, the collector's directory hands out the table, and final/ is the inproc
    run's bit for bit."""
    discover_plan(tmp_path)
    run = tmp_path / "run"
    plan = str(run / "plan.json")
    collect = program("launcher.cli", "collect", "--plan", plan, "--out", str(run),
                      "--timeout-s", "300")
    nodes = [program("launcher.node_cli", "--plan", plan, "--node-id", str(i))
             for i in (5, 2, 0, 4, 1, 3)]
    outputs = [p.communicate(timeout=300) for p in nodes]
    assert [p.returncode for p in nodes] == [0] * 6, outputs
    _, err = collect.communicate(timeout=300)
    assert collect.returncode == 0, err
    launch_ok(tmp_path / "inproc", str(ring6(tmp_path)), "d-psgd", "--transport", "inproc",
              *OPTIONS)
    assert final_files(run) == final_files(tmp_path / "inproc")
    assert len(final_files(run)) == 6
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "ok"
    assert {n["host"] for n in summary["nodes"]} == {socket.gethostname()}


def report(node: int, address: str, host: str = "h") -> bytes:
    return msgpack.packb({"node": node, "address": address, "host": host})


def dealer(context: zmq.Context, address: str, node: int) -> zmq.Socket:
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.ROUTING_ID, routing_id(node))
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    return sock


def answer(sock: zmq.Socket) -> dict[str, object]:
    assert sock.poll(30_000, zmq.POLLIN)
    got: dict[str, object] = msgpack.unpackb(sock.recv(), raw=False, strict_map_key=False)
    return got


def small_plan(tmp_path: Path, port_claims: PortClaims) -> RunPlan:
    port = port_claims.claim(1)[0]
    return resolve_host_plan(RunSpec(topology=str(ring6(tmp_path)), protocol="d-psgd",
                                     options={"dataset": "synthetic"},
                                     sets=("endpoints.nodes=discover", "endpoints.collector=h:1",
                                           f"endpoints.directory=127.0.0.1:{port}")))


def test_the_directory_answers_once_all_reported_and_drops_impostors(
        tmp_path: Path, port_claims: PortClaims) -> None:
    plan = small_plan(tmp_path, port_claims)
    directory = AddressBook(plan)
    assert plan.discovery is not None
    context = zmq.Context()
    try:
        socks = {i: dealer(context, plan.discovery.address, i) for i in plan.ids}
        socks[0].send(report(1, "tcp://10.0.0.1:5"))  # node 0's connection naming node 1
        socks[0].send(b"\xc1 not msgpack")
        for i in plan.ids:
            assert not socks[i].poll(0, zmq.POLLIN)
            socks[i].send(report(i, f"tcp://10.0.0.{i}:{4000 + i}", f"host{i % 2}"))
        table = [[i, f"tcp://10.0.0.{i}:{4000 + i}", f"host{i % 2}"] for i in plan.ids]
        assert [answer(socks[i]) for i in plan.ids] == [{"nodes": table}] * 6
        socks[2].send(report(2, "tcp://10.0.0.2:4002", "host0"))  # a resend: the same table
        assert answer(socks[2]) == {"nodes": table}
        socks[3].send(report(3, "tcp://10.0.0.9:1", "host1"))  # moved after the table went out
        assert "after the table went out" in str(answer(socks[3])["error"])
        parsed = parse_table(msgpack.packb({"nodes": table}), plan)
        assert plan.with_addresses(parsed).node(4).address == "tcp://10.0.0.4:4004"
        for sock in socks.values():
            sock.close()
    finally:
        context.term()
        directory.close()
    assert directory.rejected == {"bad_report": 2, "moved_after_table": 1}


def test_a_node_without_a_table_by_the_deadline_names_the_directory(
        tmp_path: Path, port_claims: PortClaims) -> None:
    plan = small_plan(tmp_path, port_claims)
    directory = AddressBook(plan)
    try:
        with pytest.raises(TimeoutError, match=r"node 0: the directory at tcp://127\.0\.0\.1:"
                                               r"\d+ sent no address table within 0\.2 s"):
            discover(plan, 0, "tcp://0.0.0.0:4000", 0.2)
    finally:
        directory.close()


@pytest.mark.parametrize("answer_", [
    {"error": "no"}, {"nodes": [[0, "tcp://a:1", "h"]]}, {"nodes": [[0, 1, "h"]]}, [1, 2]])
def test_a_table_that_is_not_the_plans_nodes_is_refused(
        tmp_path: Path, port_claims: PortClaims, answer_: object) -> None:
    with pytest.raises(DiscoveryError):
        parse_table(msgpack.packb(answer_), small_plan(tmp_path, port_claims))


def test_the_reported_address_is_the_interface_that_routes_to_the_directory() -> None:
    assert reachable_address("tcp://0.0.0.0:4711", "tcp://127.0.0.1:9") == "tcp://127.0.0.1:4711"


def test_a_directory_host_unknown_here_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """A --collector-host the compute nodes cannot resolve: the node says so in one line."""
    plan = resolve_host_plan(RunSpec(topology=str(ring6(tmp_path)), protocol="d-psgd",
                                     options={"dataset": "synthetic"},
                                     sets=("endpoints.nodes=discover", "endpoints.collector=h:1",
                                           "endpoints.directory=no-such-host.invalid:9")))
    plan.dump(tmp_path / "plan.json")
    done = in_process("dfl-node", "--plan", str(tmp_path / "plan.json"), "--node-id", "0",
                      "--out", str(tmp_path))
    assert done.code == 1
    assert done.err.strip().splitlines()[-1].startswith(
        "dfl-node: node 0: the directory's address tcp://no-such-host.invalid:9 is not "
        "reachable from ")


@pytest.mark.parametrize(("args", "needle"), [
    ((), "endpoints.nodes=discover: for nodes started elsewhere"),
    (("--secure",), "endpoints.nodes=discover: --secure is not supported yet"),
])
def test_a_local_launch_of_a_discover_plan_is_one_line_and_exit_2(
        tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    done = in_process("dfl-launch", "--topology", str(ring6(tmp_path)), "--protocol", "d-psgd",
                      *OPTIONS, *DISCOVER, *args, "--out", str(tmp_path / "run"))
    lines = done.err.strip().splitlines()
    assert done.code == 2 and len(lines) == 1 and needle in lines[0], done.err


def test_a_topology_that_fixes_a_node_address_contradicts_discovery(tmp_path: Path) -> None:
    done = in_process("dfl-launch", "plan", "--topology", str(ring6(tmp_path, port=7000)),
                      "--protocol", "d-psgd", *OPTIONS, *DISCOVER, "-o", str(tmp_path / "p"))
    assert done.code == 2
    assert "nodes [0] have a host or port, but endpoints.nodes=discover" in done.err


def test_dfl_node_resolving_a_discover_plan_itself_needs_the_directory(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match=r"endpoints\.directory: one node per host needs"):
        resolve_host_plan(RunSpec(topology=str(ring6(tmp_path)), protocol="d-psgd",
                                  options={"dataset": "synthetic"},
                                  sets=("endpoints.nodes=discover", "endpoints.collector=h:1")))
