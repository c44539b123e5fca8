"""The bad-input catalogue: every user error is exit 2, nothing on stdout and one line on stderr
naming the file or option, the field and the reason, before anything starts.

Each case runs the real entry point (`dfl-launch`, `dfl-topology`, `dfl-node`) in this process
with its own argv (conftest's `entry` fixture), so the exit code is the one the shell would see
(the `main` functions end in `sys.exit`); a few cases also run as subprocesses to show the
in-process runs are faithful.
`{d}` in an argument is the test's temporary directory, where the case's files are written.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.harness import ENV_ROOT, Exited

TRI = "nodes: [{id: 0}, {id: 1}, {id: 2}]\nedges: [[0, 1], [1, 2], [2, 0]]\n"
FIXED = "nodes: [{id: 0, port: PORT}, {id: 1}]\nedges: [[0, 1]]\n"
FAST = ("--dataset", "synthetic", "--rounds", "1")
# YAML aliases nine deep, nine wide: a small file whose value has 9**9 (387 million) leaves
# once expanded (the "billion laughs"); a refusal must neither expand nor print it whole.
LAUGHS = "".join("  - &l{} [{}]\n".format(k, ", ".join([f"*l{k - 1}" if k else "lol"] * 9))
                 for k in range(9))
# A code tag that, were it constructed, would end the program with exit 0 at once.
EXIT_TAG = "!!python/object/apply:sys.exit [0]"


@dataclass(frozen=True)
class Case:
    """One bad input: the entry point, its arguments, the files it reads and what stderr must
    say (every fragment, in order of appearance not required)."""

    name: str
    args: tuple[str, ...]
    expect: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)
    entry: str = "dfl-launch"


def plan(*extra: str, topology: str = "{d}/t.yaml", protocol: str = "d-psgd") -> tuple[str, ...]:
    """`dfl-launch plan` on the given topology (a file of the case by default)."""
    return ("plan", "--topology", topology, "--protocol", protocol, *FAST, *extra,
            "-o", "{d}/plan.json")


def topo(text: str) -> dict[str, str]:
    return {"t.yaml": text}


CASES = [
    # --- topology files ---
    Case("topology-missing", plan(topology="{d}/nope.yaml"), ("nope.yaml", "no such file")),
    Case("topology-not-yaml", plan(), ("t.yaml", "YAML"), topo("nodes: [1, 2\n")),
    Case("topology-binary", plan(), ("t.yaml",), topo("\x00\x01\x02")),
    Case("topology-code-tag", plan(), ("t.yaml", "malformed YAML", "python/object/apply"),
         topo(f"name: {EXIT_TAG}\n" + TRI)),
    Case("topology-billion-laughs", plan(), ("t.yaml", "nodes[0]", "must be a mapping"),
         topo("name: laughs\nnodes:\n" + LAUGHS + "edges: []\n")),
    Case("topology-unknown-key", plan(), ("t.yaml", "colour"), topo(TRI + "colour: red\n")),
    Case("topology-no-nodes", plan(), ("t.yaml", "nodes"), topo("nodes: []\nedges: []\n")),
    Case("node-id-negative", plan(), ("t.yaml", "nodes[0]", "id"),
         topo("nodes: [{id: -1}, {id: 1}]\nedges: [[-1, 1]]\n")),
    Case("node-id-wrong-type", plan(), ("t.yaml", "nodes[0]", "id"),
         topo("nodes: [{id: a}, {id: 1}]\nedges: [[a, 1]]\n")),
    Case("node-id-duplicate", plan(), ("t.yaml", "nodes[1]", "duplicate"),
         topo("nodes: [{id: 0}, {id: 0}]\nedges: []\n")),
    Case("port-wrong-type", plan(), ("t.yaml", "nodes[0]", "port", "'abc'"),
         topo("nodes: [{id: 0, port: abc}, {id: 1}]\nedges: [[0, 1]]\n")),
    Case("port-out-of-range", plan(), ("t.yaml", "nodes[0]", "port", "70000"),
         topo("nodes: [{id: 0, port: 70000}, {id: 1}]\nedges: [[0, 1]]\n")),
    Case("device-unknown-kind", plan(), ("t.yaml", "nodes[0]", "device", "tpu"),
         topo("nodes: [{id: 0, device: tpu}, {id: 1}]\nedges: [[0, 1]]\n")),
    Case("device-not-visible", plan(), ("device", "cuda:63"),
         topo("nodes: [{id: 0, device: 'cuda:63'}, {id: 1}]\nedges: [[0, 1]]\n")),
    Case("edge-unknown-node", plan(), ("t.yaml", "edges[0]", "node 5 is not in nodes"),
         topo("nodes: [{id: 0}, {id: 1}]\nedges: [[0, 5]]\n")),
    Case("edge-self-loop", plan(), ("t.yaml", "edges[1]", "self-loop"),
         topo("nodes: [{id: 0}, {id: 1}]\nedges: [[0, 1], [1, 1]]\n")),
    Case("edge-loss-above-one", plan(), ("t.yaml", "edges[0]", "loss"),
         topo("nodes: [{id: 0}, {id: 1}]\nedges: [{u: 0, v: 1, loss: 1.5}]\n")),
    Case("edge-negative-latency", plan(), ("t.yaml", "edges[0]", "latency_ms"),
         topo("nodes: [{id: 0}, {id: 1}]\nedges: [{u: 0, v: 1, latency_ms: -1}]\n")),
    Case("graph-disconnected", plan(), ("t.yaml", "disconnected"),
         topo("nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}]\nedges: [[0, 1], [2, 3]]\n")),
    # --- protocol and config ---
    Case("protocol-unknown", plan(protocol="gossip-magic"), ("--protocol", "gossip-magic"),
         topo(TRI)),
    Case("rounds-zero", plan("--rounds", "0"), ("rounds", "positive", "0"), topo(TRI)),
    Case("rounds-negative", plan("--rounds", "-3"), ("rounds", "positive", "-3"), topo(TRI)),
    Case("rounds-wrong-type", plan("--set", "rounds=many"), ("rounds", "'many'"), topo(TRI)),
    Case("rounds-not-a-number", plan("--rounds", "ten"), ("--rounds", "ten"), topo(TRI)),
    Case("eval-every-fraction", plan("--set", "eval_every=1.5"), ("eval_every", "1.5"),
         topo(TRI)),
    Case("config-key-unknown", plan("--set", "colour=red"), ("--set colour=red", "colour"),
         topo(TRI)),
    Case("config-nested-key-unknown", plan("--set", "link.colour=red"), ("link", "colour"),
         topo(TRI)),
    Case("config-file-unknown-key", plan("--config", "{d}/c.yaml"), ("c.yaml", "roundz"),
         {"t.yaml": TRI, "c.yaml": "roundz: 3\n"}),
    Case("config-file-code-tag", plan("--config", "{d}/c.yaml"), ("c.yaml", "python/object"),
         {"t.yaml": TRI, "c.yaml": f"rounds: {EXIT_TAG}\n"}),
    Case("config-file-billion-laughs", plan("--config", "{d}/c.yaml"), ("c.yaml", "rounds"),
         {"t.yaml": TRI, "c.yaml": "rounds:\n" + LAUGHS}),
    Case("config-file-missing", plan("--config", "{d}/none.yaml"), ("none.yaml", "not found"),
         topo(TRI)),
    Case("config-file-not-mapping", plan("--config", "{d}/c.yaml"), ("c.yaml", "mapping"),
         {"t.yaml": TRI, "c.yaml": "- 1\n- 2\n"}),
    Case("config-file-unreadable", plan("--config", "{d}"), ("config cannot be read",),
         topo(TRI)),
    Case("option-unknown", plan("--colour", "red"), ("--colour",), topo(TRI)),
    Case("transport-unknown", plan("--set", "transport=carrier-pigeon"),
         ("transport", "carrier-pigeon"), topo(TRI)),
    Case("link-loss-above-one", plan("--set", "link.loss=1.5"), ("link", "loss", "1.5"),
         topo(TRI)),
    Case("stc-p-edge-above-one", plan("--set", "p_edge=1.5", protocol="stc"),
         ("p_edge", "1.5"), topo(TRI)),
    Case("lr-negative", plan("--set", "lr=-0.1"), ("hyper", "lr", "-0.1"), topo(TRI)),
    Case("mixing-unknown", plan("--set", "mixing=magic"), ("mixing", "magic"), topo(TRI)),
    Case("schedule-unknown", plan("--set", "schedule=magic"), ("schedule", "magic"), topo(TRI)),
    Case("model-unknown", plan("--set", "model={name: transformer}"),
         ("model", "transformer"), topo(TRI)),
    Case("wire-cap-negative", plan("--set", "wire.max_message_bytes=-1"),
         ("wire", "max_message_bytes", "-1"), topo(TRI)),
    Case("seed-and-seeds", plan("--seed", "1", "--seeds", "1-2"), ("--seed", "--seeds"),
         topo(TRI)),
    Case("seeds-reversed", ("--topology", "{d}/t.yaml", "--protocol", "d-psgd", "--seeds", "5-2"),
         ("--seeds", "5-2"), topo(TRI)),
    Case("qffl-under-tdma", plan("--set", "schedule=tdma", protocol="qffl"),
         ("schedule", "qffl"), topo(TRI)),
    Case("outage-without-positions", plan("--set", "link.loss_model=outage"),
         ("link", "position"), topo(TRI)),
    Case("dsc-without-scenes", plan(protocol="dsc"), ("dsc", "dataset", "synthetic"),
         topo(TRI)),
    Case("ssdfl-bad-override-partition",
         plan("--partition", "iid", "--set", "model={name: mlp}", "--set",
              "hyper.clustering={override_partition: [[0, 1], [7]]}", protocol="ssd-fl"),
         ("override_partition", "7"), topo(TRI)),
    # --- limits: what the wire carries and what an input may hold ---
    Case("node-id-beyond-the-wire", plan(), ("t.yaml", "node id 4294967296", "0..4294967295"),
         topo("nodes: [{id: 0}, {id: 4294967296}]\nedges: [[0, 4294967296]]\n")),
    Case("hub-id-beyond-the-wire", plan(protocol="qffl"), ("t.yaml", "aggregator"),
         topo("nodes: [{id: 0}, {id: 4294967295}]\nedges: [[0, 4294967295]]\n")),
    Case("lr-overflows-float32", plan("--set", "lr=1e300"),
         ("--set lr=1e300", "hyper.lr", "float32", "1e+300"), topo(TRI)),
    Case("lr-vanishes-in-float32", plan("--set", "lr=1e-50"), ("hyper.lr", "float32", "1e-50"),
         topo(TRI)),
    Case("float-overflows-float32", plan("--set", "lipschitz=1e39", protocol="qffl"),
         ("hyper.lipschitz", "float32"), topo(TRI)),
    Case("rounds-beyond-the-ceiling", plan("--rounds", str(10**12)),
         ("rounds", "at most", str(10**12)), topo(TRI)),
    Case("topology-name-too-long", plan(), ("t.yaml", "name", "at most 100 characters"),
         topo(f"name: {'x' * 101}\n{TRI}")),
    Case("set-too-long", plan("--set", "dataset=" + "x" * 70_000), ("--set", "65536"),
         topo(TRI)),
    Case("keys-without-a-results-key", plan("--keys", "{d}"), ("--keys", "results.key"),
         topo(TRI)),
    # --- data ---
    Case("dataset-unknown", plan("--dataset", "imagenet"), ("dataset", "imagenet"), topo(TRI)),
    Case("dataset-missing", plan("--dataset", "fmnist", "--data-root", "{d}/no-data"),
         ("fmnist", "no-data"), topo(TRI)),
    Case("partition-unknown", plan("--partition", "halves"), ("partition", "halves"), topo(TRI)),
    Case("partition-bad-alpha", plan("--partition", "dirichlet:-1"),
         ("partition", "dirichlet:-1"), topo(TRI)),
    Case("partition-leaves-node-empty", plan("--set", "synthetic={train_size: 2}"),
         ("partition", "cannot split 2 samples into 3 parts"), topo(TRI)),
    # --- run-time resources, checked before anything starts ---
    Case("port-in-use", ("--topology", "{d}/t.yaml", "--protocol", "d-psgd", *FAST,
                         "--out", "{d}/run"),
         ("t.yaml", "node 0", "port", "in use"), {"t.yaml": FIXED}),
    Case("collector-port-in-use", ("--topology", "{d}/t.yaml", "--protocol", "d-psgd", *FAST,
                                   "--set", "endpoints.collector=127.0.0.1:PORT",
                                   "--out", "{d}/run"),
         ("endpoints.collector", "in use"), topo(TRI)),
    # --- dfl-topology ---
    Case("generate-zero-nodes", ("generate", "ring", "-n", "0", "-o", "{d}/g.yaml"),
         ("ring", "n must be at least 3, got 0"),
         entry="dfl-topology"),
    Case("generate-p-above-one", ("generate", "er", "-n", "5", "--p", "1.5", "-o", "{d}/g.yaml"),
         ("p must be in [0, 1], got 1.5",), entry="dfl-topology"),
    Case("generate-unknown-kind", ("generate", "hypercube", "-o", "{d}/g.yaml"), ("hypercube",),
         entry="dfl-topology"),
    Case("show-missing-file", ("show", "{d}/nope.yaml"), ("nope.yaml",), entry="dfl-topology"),
    # --- dfl-node ---
    Case("node-plan-missing", ("--plan", "{d}/none.json", "--node-id", "0"), ("none.json",),
         entry="dfl-node"),
    Case("node-plan-not-json", ("--plan", "{d}/p.json", "--node-id", "0"), ("p.json",),
         {"p.json": "{not json"}, entry="dfl-node"),
    Case("node-topology-without-ports", ("--topology", "{d}/t.yaml", "--protocol", "d-psgd",
                                         "--node-id", "0"), ("port",), topo(TRI),
         entry="dfl-node"),
    Case("node-topology-without-results-key",
         ("--topology", "{d}/t.yaml", "--protocol", "d-psgd", "--set",
          "endpoints.collector=127.0.0.1:1", "--node-id", "0"), ("--topology", "results key"),
         topo("nodes: [{id: 0, port: 1}, {id: 1, port: 2}]\nedges: [[0, 1]]\n"),
         entry="dfl-node"),
    Case("node-both-plan-and-topology", ("--plan", "{d}/p.json", "--topology", "{d}/t.yaml",
                                         "--node-id", "0"), ("--topology", "--plan"),
         {"t.yaml": TRI, "p.json": "{}"}, entry="dfl-node"),
]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A local TCP port some other program is listening on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def materialise(case: Case, tmp: Path, port: int) -> list[str]:
    for name, text in case.files.items():
        (tmp / name).write_text(text.replace("PORT", str(port)))
    return [arg.replace("{d}", str(tmp)).replace("PORT", str(port)) for arg in case.args]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_exit_2_and_one_line(
    case: Case, tmp_path: Path, busy_port: int, entry: Callable[..., Exited],
) -> None:
    done = entry(case.entry, *materialise(case, tmp_path, busy_port))
    assert (done.code, done.out) == (2, ""), done.err
    assert done.err.endswith("\n") and done.err.count("\n") == 1, done.err
    for fragment in case.expect:
        assert fragment in done.err, (fragment, done.err)
    assert not (tmp_path / "plan.json").exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", ["graph-disconnected", "rounds-zero"])
def test_bad_input_as_a_subprocess(name: str, tmp_path: Path, busy_port: int) -> None:
    """The shell's view of two catalogue entries: the same code, stream contents and line."""
    case = next(c for c in CASES if c.name == name)
    args = materialise(case, tmp_path, busy_port)
    done = subprocess.run([sys.executable, "-m", "launcher.cli", *args], env=ENV_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout, done.stderr.count("\n")) == (2, "", 1), done.stderr
    assert all(fragment in done.stderr for fragment in case.expect)
