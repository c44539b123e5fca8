"""Round cost: a real round of learning beside the floor the machine sets for the same work.

`python -m bench.round_cost [--full]` runs D-PSGD (adapt-then-combine, one SGD step of batch 8
per round, IID Fashion-MNIST, one torch thread per node, no checkpoints, evaluation only at the
end) with the MLP (784-64-10, 50,890 parameters) and the DMFL-SQ CNN (1,630,090), one process
per node over ZeroMQ, on ring20 and on ER(50, 0.1), and measures in the same run:

- the real round: the nodes' steady wall seconds per round (`summary.json` `round_seconds`,
  rounds after the first) and their CPU seconds per round (`round_cpu_seconds`: every thread
  of the node's process, so ZeroMQ's I/O thread and the kernel's share count too);
- the floor: each node's round work timed in this one process with nothing around it: the
  local step (bare torch: index the batch, forward, cross-entropy, backward, w -= lr g), the
  mixing arithmetic (sum_j W_ij w_j over the node's degree, into the parameters), and the bytes
  the mesh moves per round at raw pyzmq speed (DEALER->ROUTER between two fresh processes at
  the model's message size, measured in turn with the mesh runs). Compute scales to nodes over
  cores: floor = nodes * (step + mix) / min(cores, nodes) + mesh bytes / raw throughput, since
  raw pyzmq already uses the machine's cores on both ends;
- the framework's CPU per node-round: the node's CPU per round minus its floor work (step, mix,
  and its sent bytes at raw pyzmq's CPU per byte, both ends counted), i.e. what encoding,
  decoding, validation, ledgers, the clock, records and Python dispatch cost;
- where that goes: one more run profiles node 0's rounds under cProfile on the thread's CPU
  clock (`DFL_MESH_PROFILE_CLOCK=cpu`) and splits them into buckets. cProfile slows Python
  code far more than torch kernels, so the shares overstate the Python parts; the framework
  CPU above is the unprofiled figure.

Goals (ring20): round / floor <= 1.3 (MLP) and <= 1.15 (CNN); framework CPU <= 1 ms per
node-round (MLP).
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

import torch
import zmq
from torch.nn import functional as F

from bench.figures import Figure, Mode, compare, interleaved, median, module_main
from bench.launch import ROOT, launch, require_data
from bench.overhead import er50
from dfl_node.learning.models import build_model

INPUT = (1, 28, 28)  # one Fashion-MNIST sample
CLASSES = 10
BATCH = 8
LR = 0.1
MODELS: dict[str, dict[str, Any]] = {"MLP": {"name": "mlp", "hidden": [64]},
                                     "CNN": {"name": "dmflsq-cnn"}}
GOALS = {"MLP": 1.3, "CNN": 1.15}
FRAMEWORK_GOAL_MS = 1.0  # MLP, per node-round
RAW_BYTES = 64 << 20  # bytes per raw throughput sample
PROFILE_NODE = 0


@dataclass(frozen=True)
class Sizes:
    """How long each run is, per model: rounds of the mesh and steps of the floor."""

    rounds: dict[str, int]
    floor_steps: dict[str, int]


QUICK = Mode(reps=2, rounds=0, note="quick: 2 interleaved repetitions")
FULL = Mode(reps=4, rounds=0, note="full: 4 interleaved repetitions")
QUICK_SIZES = Sizes({"MLP": 60, "CNN": 10}, {"MLP": 400, "CNN": 40})
FULL_SIZES = Sizes({"MLP": 150, "CNN": 25}, {"MLP": 1000, "CNN": 100})


# --- the floor, in this one process ---------------------------------------------------------

def single_thread(fn: Callable[[], float]) -> float:
    """`fn` with torch on one thread, as every node runs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn()
    finally:
        torch.set_num_threads(threads)


def step_seconds(spec: dict[str, Any], steps: int) -> float:
    """Median seconds of one bare SGD step on a random batch of BATCH samples."""
    model = build_model(spec, INPUT, CLASSES, seed=0)
    data = torch.rand(1024, *INPUT)
    labels = torch.randint(0, CLASSES, (1024,))
    params = list(model.parameters())
    gen = torch.Generator().manual_seed(0)

    def step() -> None:
        idx = torch.randint(0, 1024, (BATCH,), generator=gen)
        model.zero_grad(set_to_none=False)
        F.cross_entropy(model(data[idx]), labels[idx]).backward()
        with torch.no_grad():
            for p in params:
                p.sub_(p.grad, alpha=LR)  # type: ignore[arg-type]

    return timed(step, steps)


def mix_seconds(spec: dict[str, Any], degree: int, steps: int) -> float:
    """Median seconds of sum_j W_ij w_j over `degree` neighbours and self, into the model."""
    model = build_model(spec, INPUT, CLASSES, seed=0)
    params = list(model.parameters())
    theirs = [[p.detach().clone() for p in params] for _ in range(degree)]
    weight = 1.0 / (degree + 1)

    def mix() -> None:
        with torch.no_grad():
            for i, p in enumerate(params):
                acc = torch.zeros_like(p)
                acc.add_(p, alpha=weight)
                for tensors in theirs:
                    acc.add_(tensors[i], alpha=weight)
                p.copy_(acc)

    return timed(mix, steps)


def timed(fn: Callable[[], None], steps: int) -> float:
    for _ in range(max(steps // 10, 3)):  # warm-up: allocator, dispatch caches
        fn()
    samples = []
    for _ in range(steps):
        began = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def param_bytes(spec: dict[str, Any]) -> int:
    model = build_model(spec, INPUT, CLASSES, seed=0)
    return sum(p.numel() * p.element_size() for p in model.parameters())


# --- raw pyzmq, between two fresh processes --------------------------------------------------

def _raw_peer(out: Connection, count: int) -> None:
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.bind("tcp://127.0.0.1:*")
    out.send(router.getsockopt_string(zmq.LAST_ENDPOINT))
    router.send_multipart(router.recv_multipart())
    began = time.process_time()
    for _ in range(count):
        identity, _payload = router.recv_multipart(copy=False)
    out.send(time.process_time() - began)
    router.send_multipart([identity.bytes, b"done"])
    router.close(linger=1000)
    ctx.term()


@dataclass(frozen=True)
class Raw:
    throughput: float  # bytes/s
    cpu_per_byte: float  # CPU seconds of both ends per byte moved


def raw_zmq(message_bytes: int) -> Raw:
    """DEALER->ROUTER transfers of `message_bytes` messages (RAW_BYTES in all), sent as a node
    sends them (copied by pyzmq), with both processes' CPU."""
    count = max(RAW_BYTES // message_bytes, 20)
    fork = multiprocessing.get_context("fork")
    here, there = fork.Pipe()
    peer = fork.Process(target=_raw_peer, args=(there, count), daemon=True)
    peer.start()
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(here.recv())
    payload = bytes(message_bytes)
    dealer.send(b"p")
    dealer.recv()
    began, cpu_began = time.perf_counter(), time.process_time()
    for _ in range(count):
        dealer.send(payload)
    dealer.recv()
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    cpu += here.recv()
    dealer.close(linger=0)
    ctx.term()
    peer.join(10)
    return Raw(count * message_bytes / seconds, cpu / (count * message_bytes))


# --- the mesh, from its own records ------------------------------------------------------------

@dataclass
class Mesh:
    """One model on one topology; `__call__` is one run, returning its seconds per round."""

    model: str
    topology: Path
    rounds: int
    workdir: Path
    cpu: list[float] = field(default_factory=list)  # per run: CPU seconds per node-round
    runs: int = 0

    @property
    def name(self) -> str:
        return f"{self.model} {self.topology.stem}"

    def degrees(self) -> list[int]:
        plan = json.loads((self.workdir / f"{self.key}-1" / "plan.json").read_text())
        edges = plan["topology"]["edges"]
        return [sum(1 for e in edges if node["id"] in e) for node in plan["nodes"]]

    @property
    def key(self) -> str:
        return f"{self.model}-{self.topology.stem}"

    def __call__(self, extra_env: dict[str, str] | None = None, tag: str = "") -> float:
        self.runs += 1
        run_dir = self.workdir / f"{self.key}{tag}-{self.runs}"
        summary = launch(options(self.model, self.topology, self.rounds), run_dir,
                         f"bench.round_cost: {self.name}", extra_env)
        self.cpu.append(steady(summary["round_cpu_seconds"]))
        return steady(summary["round_seconds"])


def options(model: str, topology: Path, rounds: int) -> list[str]:
    spec = json.dumps(MODELS[model])
    return ["--topology", str(topology), "--protocol", "d-psgd", "--rounds", str(rounds),
            "--eval-every", str(rounds), "--dataset", "fmnist", "--partition", "iid",
            "--set", "local_steps=1", "--set", f"batch_size={BATCH}", "--set", "form=atc",
            "--set", f"lr={LR}", "--set", f"model={spec}", "--set", "checkpoint_every=0",
            "--set", "torch_threads=1", "--set", "eval_size=256",
            # 50 CNN nodes on 2 shared cores can starve a node for seconds; liveness is not
            # what this group measures
            "--set", "wire.deadline_s=120"]


def steady(per_round: dict[str, float]) -> float:
    """Median over rounds after the first (which also waits for the slowest node's start)."""
    return statistics.median(v for r, v in per_round.items() if r != "0")


# --- where a node's round CPU goes ---------------------------------------------------------------

# bucket -> (file suffix, function): cumulative CPU of node 0 in that function, per round
BUCKETS: dict[str, tuple[str, str]] = {
    "local step (LocalSGD)": ("protocols/sdk/learning.py", "gradient"),
    "encode and self-check (Comm._outgoing)": ("dfl_node/comm/channel.py", "_outgoing"),
    "send (transport)": ("dfl_node/transports/zeromq.py", "send"),
    "receive (transport)": ("dfl_node/transports/zeromq.py", "recv"),
    "decode and validation (Comm._accepted)": ("dfl_node/comm/channel.py", "_accepted"),
    "received tensors": ("dfl_node/comm/received.py", "tensors"),
    "traffic ledger": ("dfl_node/ledgers/traffic.py", "_record"),
    "formula ledger": ("dfl_node/ledgers/formula.py", "charge_all"),
    "virtual clock": ("dfl_node/netsim/virtual_clock.py", "sync_step"),
    "settle (transport flush)": ("dfl_node/comm/channel.py", "_settle"),
    "mixing (sdk.mix)": ("protocols/sdk/mixing.py", "mix"),
    "failure agreement": ("dfl_node/runner/membership.py", "after_round"),
}
ROUND = ("protocols/gossip/dpsgd.py", "run_round")
DISPATCH = "Python dispatch and the rest (run_round minus the above)"
PROFILED_MS = "profiled CPU per round, ms"


def profile_buckets(prof: Path, rounds: int) -> dict[str, float]:
    """Each bucket's share of node 0's profiled round CPU; the rest is the protocol's own
    Python (and what the buckets do not name)."""
    stats = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    cumulative: dict[tuple[str, str], float] = {}
    for (filename, _, function), entry in stats.items():
        for key in [*BUCKETS.values(), ROUND, ("dfl_node/runner/membership.py", "after_round")]:
            if filename.endswith(key[0]) and function == key[1]:
                cumulative[key] = cumulative.get(key, 0.0) + entry[3]
    total = cumulative.get(ROUND, 0.0) + cumulative.get(BUCKETS["failure agreement"], 0.0)
    if total <= 0:
        return {}
    shares = {label: cumulative.get(key, 0.0) / total for label, key in BUCKETS.items()}
    nested = ("received tensors", "traffic ledger")  # inside receive and send
    shares[DISPATCH] = 1.0 - sum(v for k, v in shares.items() if k not in nested)
    shares[PROFILED_MS] = total / rounds * 1e3
    return shares


# --- figures -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Floor:
    step: float
    mix: dict[int, float]  # degree -> seconds
    message_bytes: int


def floor_of(model: str, degrees: list[int], steps: int) -> Floor:
    spec = MODELS[model]
    step = single_thread(lambda: step_seconds(spec, steps))
    mix = {d: single_thread(lambda d=d: mix_seconds(spec, d, steps))  # type: ignore[misc]
           for d in sorted(set(degrees))}
    return Floor(step, mix, param_bytes(spec))


def figures(quick: bool) -> list[Figure]:
    require_data("fmnist", None)
    mode, sizes = (QUICK, QUICK_SIZES) if quick else (FULL, FULL_SIZES)
    found: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="dfl-bench-round-cost-") as tmp:
        work = Path(tmp)
        topologies = [ROOT / "topologies" / "ring20.yaml", er50(work)]
        for model in MODELS:
            found += model_figures(model, topologies, sizes, mode, work)
    return found


def model_figures(model: str, topologies: list[Path], sizes: Sizes, mode: Mode,
                  work: Path) -> list[Figure]:
    """One model's meshes, interleaved with raw pyzmq at its message size, then the floor."""
    meshes = [Mesh(model, t, sizes.rounds[model], work) for t in topologies]
    raws: list[Raw] = []
    message = param_bytes(MODELS[model])

    def raw_sample() -> float:
        raws.append(raw_zmq(message))
        return raws[-1].throughput

    runs: dict[str, Callable[[], float]] = {"raw": raw_sample}
    runs.update({m.name: m for m in meshes})
    samples = interleaved(runs, mode.reps)
    raw = Raw(median(samples["raw"]), median([r.cpu_per_byte for r in raws]))
    profiled = profile(meshes[0], work)
    found = []
    for mesh in meshes:
        degrees = mesh.degrees()
        floor = floor_of(model, degrees, sizes.floor_steps[model])
        found.append(figure(mesh, degrees, floor, raw, samples[mesh.name], mode,
                            profiled if mesh is meshes[0] else {}))
        if model == "MLP" and mesh is meshes[0]:
            found.append(framework_figure(found[-1]))
    return found


def profile(mesh: Mesh, work: Path) -> dict[str, float]:
    """One more run with node PROFILE_NODE under cProfile on its CPU clock (not timed)."""
    twin = Mesh(mesh.model, mesh.topology, mesh.rounds, work)
    twin({"DFL_MESH_PROFILE": str(PROFILE_NODE), "DFL_MESH_PROFILE_CLOCK": "cpu"}, "-profiled")
    prof = work / f"{twin.key}-profiled-1" / "profile" / f"node-{PROFILE_NODE}.prof"
    return profile_buckets(prof, mesh.rounds) if prof.exists() else {}


def figure(mesh: Mesh, degrees: list[int], floor: Floor, raw: Raw, seconds: list[float],
           mode: Mode, buckets: dict[str, float]) -> Figure:
    nodes = len(degrees)
    cores = min(os.cpu_count() or 1, nodes)
    compute = sum(floor.step + floor.mix[d] for d in degrees) / cores
    mesh_bytes = sum(degrees) * floor.message_bytes
    floor_s = compute + mesh_bytes / raw.throughput
    node_floor_cpu = statistics.mean(
        floor.step + floor.mix[d] + d * floor.message_bytes * raw.cpu_per_byte for d in degrees)
    framework_ms = (median(mesh.cpu) - node_floor_cpu) * 1e3
    extra: dict[str, float | str] = {
        "nodes": float(nodes), "mean_degree": statistics.mean(degrees),
        "floor_step_ms": floor.step * 1e3,
        "floor_mix_ms": statistics.mean(floor.mix[d] for d in degrees) * 1e3,
        "floor_compute_s": compute, "floor_bytes_s": mesh_bytes / raw.throughput,
        "message_bytes": float(floor.message_bytes),
        "raw_throughput_GBps": raw.throughput / 1e9,
        "raw_cpu_ns_per_byte": raw.cpu_per_byte * 1e9,
        "node_cpu_per_round_ms": median(mesh.cpu) * 1e3,
        "framework_cpu_per_node_round_ms": framework_ms,
        "samples_s": ", ".join(f"{s:.4f}" for s in seconds),
        **{f"profile: {k}": round(v, 4) for k, v in buckets.items()},
    }
    ring20 = mesh.topology.stem == "ring20"
    note = (f"{mode.note}; {os.cpu_count()} cores; framework CPU {framework_ms:.2f} ms per "
            f"node-round" + (f" (goal <= {FRAMEWORK_GOAL_MS:g})" if mesh.model == "MLP"
                             and ring20 else ""))
    if buckets:
        top = sorted(((v, k) for k, v in buckets.items() if k != PROFILED_MS), reverse=True)
        note += "; node 0's round CPU: " + ", ".join(f"{k} {v:.0%}" for v, k in top[:5])
    return compare("round_cost", f"D-PSGD round, {mesh.name} (zmq)", median(seconds), "s",
                   "floor: nodes*(step+mix)/cores + mesh bytes/raw pyzmq", floor_s,
                   goal_max=GOALS[mesh.model] if ring20 else None, reps=len(seconds),
                   note=note, extra=extra)


def framework_figure(round_figure: Figure) -> Figure:
    """The MLP's framework CPU per node-round on ring20 as a row of its own, with its goal."""
    value = float(round_figure.extra["framework_cpu_per_node_round_ms"])
    node = float(round_figure.extra["node_cpu_per_round_ms"])
    return Figure("round_cost", "framework CPU per node-round, MLP ring20", value, "ms",
                  "the node's CPU per round", node, value / node, f"<= {FRAMEWORK_GOAL_MS:g}",
                  value <= FRAMEWORK_GOAL_MS, round_figure.reps,
                  "node CPU per round minus its floor work (step, mix, bytes at raw CPU/byte)")


def main() -> None:
    module_main(figures, __doc__, "4 repetitions of longer runs")


if __name__ == "__main__":
    main()
