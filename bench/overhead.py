"""Round overhead: how far a gossip round over real sockets is from what the wire allows.

`python -m bench.overhead [--full]` launches pure gossip averaging (d-psgd with
`local_steps: 0`: no gradient, Theta <- W Theta) of a 1.04M-parameter MLP on ring20 and on a
connected Erdős–Rényi graph of 50 nodes, one process per node over ZeroMQ, and takes the time
per round from the run's own record (`summary.json` `round_seconds`: the nodes' wall time in
each round, without start-up, evaluation or the final save; round 0, the warm-up, is left out).

The ideal, per round, is what the busiest node must move divided by raw pyzmq's speed, plus
one round trip for the round's one communication step: (data bytes that node sent and
received in a round, from `ledger.json`) / (raw DEALER->ROUTER loopback throughput at the same
message size) + RTT (raw, 1-byte ping-pong). Raw throughput and RTT are measured between two
fresh processes in turn with the mesh runs (bench/figures.py: interleaved repetitions), so the
ratio measured / ideal holds while absolute speeds drift. The per-node ideal assumes every node
has a core to itself; on a machine with fewer cores than nodes, the mesh-wide reference (all
bytes the mesh sent in a round over the same raw throughput) is given beside it. On a machine
shared with other work, 20-50 mesh processes get a larger share of the contended cores than the
two raw processes do, which flatters the mesh against both references.

A further run profiles node 0 (`DFL_MESH_PROFILE`, dfl_node/runner/profiling.py) and the figure's
extra fields split its rounds' time into buckets: waiting for neighbours, sending, decoding
and admitting, encoding, mixing arithmetic and the runtime's bookkeeping.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import zmq

from bench.figures import Figure, Mode, compare, interleaved, median, module_main
from bench.launch import ROOT, later_rounds, launch
from topologies.generators import erdos_renyi
from topologies.writer import write_topology

HIDDEN = (1000, 1000)  # synthetic data has 32 features: 32*1000 + 1000*1000 + 1000*10 + biases
PARAMS = 32 * 1000 + 1000 + 1000 * 1000 + 1000 + 1000 * 10 + 10  # 1,044,010
MESSAGE_BYTES = 4 * PARAMS
RAW_MESSAGES = 25  # messages per raw throughput sample (104 MB)
RTT_TRIPS = 200
STEPS_PER_ROUND = 1  # d-psgd: one exchange with every neighbour
PROFILE_NODE = 0
EVAL_SIZE = 64  # the one evaluation at the end is not timed; kept small so runs end fast


QUICK = Mode(reps=3, rounds=4, note="quick: 3 interleaved repetitions of 4-round runs")
FULL = Mode(reps=5, rounds=12, note="full: 5 interleaved repetitions of 12-round runs")


# --- raw pyzmq, between two fresh processes ------------------------------------------------

def _raw_peer(endpoint_out: Connection, messages: int) -> None:
    """The ROUTER side: echo one ping (the connection is then up), receive `messages`
    messages and answer once, then echo RTT_TRIPS pings."""
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.bind("tcp://127.0.0.1:*")
    endpoint_out.send(router.getsockopt_string(zmq.LAST_ENDPOINT))
    router.send_multipart(router.recv_multipart())
    for _ in range(messages):
        identity, _payload = router.recv_multipart(copy=False)
    router.send_multipart([identity.bytes, b"done"])
    for _ in range(RTT_TRIPS):
        router.send_multipart(router.recv_multipart())
    router.close(linger=1000)
    ctx.term()


def raw_zmq() -> tuple[float, float]:
    """(bytes/s of DEALER->ROUTER transfers of MESSAGE_BYTES messages, median RTT in s)."""
    fork = multiprocessing.get_context("fork")
    here, there = fork.Pipe()
    peer = fork.Process(target=_raw_peer, args=(there, RAW_MESSAGES), daemon=True)
    peer.start()
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(here.recv())
    payload = bytes(MESSAGE_BYTES)
    ping(dealer)
    began = time.perf_counter()
    for _ in range(RAW_MESSAGES):
        dealer.send(payload, copy=False)
    dealer.recv()
    throughput = RAW_MESSAGES * MESSAGE_BYTES / (time.perf_counter() - began)
    rtt = statistics.median(ping(dealer) for _ in range(RTT_TRIPS))
    dealer.close(linger=0)
    ctx.term()
    peer.join(10)
    return throughput, rtt


def ping(dealer: zmq.Socket) -> float:
    """Seconds for one 1-byte message to the peer and its echo back."""
    began = time.perf_counter()
    dealer.send(b"p")
    dealer.recv()
    return time.perf_counter() - began


# --- the mesh, from its own records -----------------------------------------------------------

@dataclass
class Mesh:
    """One topology's gossip runs; `__call__` is one run, returning its seconds per round."""

    name: str
    topology: Path
    rounds: int
    workdir: Path
    node_bytes: float = 0.0  # per round, data bytes the busiest node sent and received
    mesh_bytes: float = 0.0  # per round, data bytes the whole mesh sent
    runs: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)

    def __call__(self) -> float:
        self.runs += 1
        run_dir = self.workdir / f"{self.name}-{self.runs}"
        summary = launch_gossip(self.topology, self.rounds, run_dir, self.extra_env)
        self.node_bytes, self.mesh_bytes = round_bytes(run_dir)
        return steady_round_seconds(summary)


def launch_gossip(topology: Path, rounds: int, run_dir: Path,
                  extra_env: dict[str, str]) -> dict[str, Any]:
    """A gossip-only run of the 1M-parameter MLP, evaluated once at the end on a small
    subset, no checkpoints."""
    options = ["--topology", str(topology), "--protocol", "d-psgd", "--rounds", str(rounds),
               "--eval-every", str(rounds), "--dataset", "synthetic", "--partition", "iid",
               "--set", "local_steps=0", "--set", f"model={{name: mlp, hidden: {list(HIDDEN)}}}",
               "--set", "checkpoint_every=0", "--set", f"eval_size={EVAL_SIZE}"]
    return launch(options, run_dir, f"bench.overhead: {topology.name}", extra_env)


def steady_round_seconds(summary: dict[str, Any]) -> float:
    """Mean over rounds after the first of the nodes' mean wall seconds per round."""
    return statistics.mean(later_rounds(summary))


def round_bytes(run_dir: Path) -> tuple[float, float]:
    """(the busiest node's data bytes sent + received per round, the mesh's bytes sent per
    round), from ledger.json: every node's own cells, so nothing is derived from the plan."""
    ledger = json.loads((run_dir / "ledger.json").read_text())
    rounds = {cell["round"] for rec in ledger.values() for cell in rec["cells"]}
    per_node = [sum(c["payload_bytes"] + c["framing_bytes"] for c in rec["cells"]
                    if c["traffic"] == "data") / len(rounds) for rec in ledger.values()]
    mesh = sum(c["payload_bytes"] + c["framing_bytes"] for node, rec in ledger.items()
               for c in rec["cells"] if c["traffic"] == "data" and c["src"] == int(node))
    return max(per_node), mesh / len(rounds)


# --- where a round's time goes ------------------------------------------------------------------

ADMIT = "receive: admit (Comm._admit)"
ACCEPTED = "receive: decode and checks (Comm._accepted, in _admit)"
COPY = "receive: copy into torch and ledger (admit - accepted)"
# bucket -> (file suffix, function) whose cumulative time in node 0's rounds it is
BUCKETS: dict[str, tuple[str, str]] = {
    "wait for neighbours (zmq poll)": ("zmq/sugar/poll.py", "poll"),
    ADMIT: ("dfl_node/comm/channel.py", "_admit"),
    ACCEPTED: ("dfl_node/comm/channel.py", "_accepted"),
    "snapshot, encode, self-check (Comm._outgoing)": ("dfl_node/comm/channel.py", "_outgoing"),
    "send (zmq send_multipart)": ("dfl_node/transports/zeromq.py", "send"),
    "ledger": ("dfl_node/ledgers/traffic.py", "_record"),
    "formula bits": ("dfl_node/ledgers/formula.py", "charge_all"),
    "virtual clock": ("dfl_node/netsim/virtual_clock.py", "sync_step"),
    "round bookkeeping (Comm.round setter)": ("dfl_node/comm/channel.py", "round"),
    "failure agreement": ("dfl_node/runner/membership.py", "after_round"),
}
ROUND = ("protocols/gossip/dpsgd.py", "run_round")
AFTER_ROUND = BUCKETS["failure agreement"]
PROFILED = "rounds' seconds profiled"
RUNTIME_FILES = ("dfl_node/comm/channel.py", "dfl_node/ledgers/formula.py",
                 "dfl_node/netsim/virtual_clock.py")


def profile_buckets(prof: Path) -> dict[str, float]:
    """Each bucket's share of node 0's time in its rounds (run_round and the failure agreement;
    the final evaluation is left out), from cProfile's cumulative times: buckets nest (the
    ledger is inside send and admit; what admit does besides decoding is the copy into the
    protocol's tensors), and the mixing arithmetic is what run_round does itself."""
    stats = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    cumulative: dict[tuple[str, str], float] = {}
    for (filename, _, function), entry in stats.items():
        for key in [*BUCKETS.values(), ROUND]:
            if filename.endswith(key[0]) and function == key[1]:
                cumulative[key] = cumulative.get(key, 0.0) + entry[3]
    rounds = cumulative.get(ROUND, 0.0) + cumulative.get(AFTER_ROUND, 0.0)
    shares = {label: cumulative.get(key, 0.0) / rounds for label, key in BUCKETS.items()}
    shares[COPY] = shares[ADMIT] - shares[ACCEPTED]
    shares["mixing arithmetic (torch, in d-psgd)"] = mixing_seconds(stats) / rounds
    shares[PROFILED] = rounds
    return shares


def mixing_seconds(stats: dict[Any, Any]) -> float:
    """run_round's own time and that of every callee other than the runtime's (the exchange,
    formula bits, virtual clock): the torch arithmetic of W Theta."""
    seconds = 0.0
    for (filename, _, function), (_, _, own, _, callers) in stats.items():
        for (caller_file, _, caller), edge in callers.items():
            if caller_file.endswith(ROUND[0]) and caller == ROUND[1] \
                    and not filename.endswith(RUNTIME_FILES):
                seconds += edge[3]
        if filename.endswith(ROUND[0]) and function == ROUND[1]:
            seconds += own
    return seconds


# --- figures ----------------------------------------------------------------------------------

def figures(quick: bool) -> list[Figure]:
    mode = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="dfl-bench-overhead-") as tmp:
        work = Path(tmp)
        meshes = [Mesh("ring20", ROOT / "topologies" / "ring20.yaml", mode.rounds, work),
                  Mesh("er50", er50(work), mode.rounds, work)]
        raw: list[tuple[float, float]] = []

        def raw_sample() -> float:
            raw.append(raw_zmq())
            return raw[-1][0]

        runs: dict[str, Callable[[], float]] = {"raw": raw_sample}
        runs.update({m.name: m for m in meshes})
        samples = interleaved(runs, mode.reps)
        buckets = profile_run(meshes[0], work)
    throughput = median(samples["raw"])
    rtt = median([r for _, r in raw])
    return [overhead_figure(m, samples[m.name], throughput, rtt, mode, buckets
                            if m is meshes[0] else {}) for m in meshes]


def er50(workdir: Path) -> Path:
    """ER(50, 0.1), drawn again until connected (no bridges added: a pure G(n, p) graph)."""
    path = workdir / "er50.yaml"
    write_topology(erdos_renyi(50, 0.1, seed=0, repair="resample"), path)
    return path


def profile_run(mesh: Mesh, workdir: Path) -> dict[str, float]:
    """One more run of `mesh` with node PROFILE_NODE under cProfile (not timed: the profiler
    slows that node, and through it its neighbours)."""
    profiled = Mesh(f"{mesh.name}-profiled", mesh.topology, mesh.rounds, workdir,
                    extra_env={"DFL_MESH_PROFILE": str(PROFILE_NODE)})
    profiled()
    return profile_buckets(workdir / f"{profiled.name}-1" / "profile"
                           / f"node-{PROFILE_NODE}.prof")


def overhead_figure(mesh: Mesh, seconds: list[float], throughput: float, rtt: float,
                    mode: Mode, buckets: dict[str, float]) -> Figure:
    ideal = mesh.node_bytes / throughput + STEPS_PER_ROUND * rtt
    mesh_ideal = mesh.mesh_bytes / throughput + STEPS_PER_ROUND * rtt
    extra: dict[str, float | str] = {
        "node_bytes_per_round": mesh.node_bytes, "mesh_bytes_per_round": mesh.mesh_bytes,
        "raw_throughput_GBps": throughput / 1e9, "raw_rtt_ms": rtt * 1e3,
        "mesh_ideal_s": mesh_ideal, "ratio_vs_mesh_ideal": median(seconds) / mesh_ideal,
        "samples_s": ", ".join(f"{s:.3f}" for s in seconds),
        **{f"profile: {k}": round(v, 4) for k, v in buckets.items()},
    }
    note = f"{mode.note}; {os.cpu_count()} cores" + profile_note(buckets)
    return compare("overhead", f"gossip round, {mesh.name}, {PARAMS / 1e6:.2f}M params (zmq)",
                   median(seconds), "s", "busiest node's bytes / raw pyzmq throughput + 1 RTT",
                   ideal, reps=len(seconds), note=note, extra=extra)


def profile_note(buckets: dict[str, float], top: int = 4) -> str:
    """The largest buckets, for the suite's table (which shows notes, not extra fields);
    admit is shown by its two parts."""
    if not buckets:
        return ""
    shares = sorted(((v, k) for k, v in buckets.items() if k not in (PROFILED, ADMIT)),
                    reverse=True)
    return f"; node {PROFILE_NODE}'s round time: " + ", ".join(
        f"{label} {share:.0%}" for share, label in shares[:top])


def main() -> None:
    module_main(figures, __doc__, "5 repetitions of longer runs")


if __name__ == "__main__":
    main()
