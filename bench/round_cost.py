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

The floor leaves out what it costs the OS to share few cores among many processes: context
switches, wake-ups on every message, caches refilled after each. No framework can avoid that,
so on ring20 a bare mesh runs in turn with the others: one process per node, each round one bare
SGD step (the floor's), the flat parameters to both neighbours over pyzmq PUSH/PULL, theirs
received and mixed as the floor mixes, timed like the nodes' rounds. Its round over the floor
is what this machine allows any mesh; the framework's round over the bare one, and its CPU per
node-round minus the bare one's, are what the framework itself costs.

Goals (ring20): round / floor <= 1.3 (MLP) and <= 1.15 (CNN); framework CPU <= 1 ms per
node-round (MLP).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pstats
import statistics
import struct
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import torch
import zmq
from torch.nn import functional as F

from bench.figures import (
    Figure,
    Mode,
    compare,
    interleaved,
    median,
    module_main,
    not_measured,
)
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
RING = "ring20"  # the topology the bare mesh is measured on
RING_NODES = 20
BARE_TIMEOUT_S = 600.0  # a whole bare run, start to stop


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
    return timed(sgd_step(build_model(spec, INPUT, CLASSES, seed=0), 0), steps)


def sgd_step(model: torch.nn.Module, seed: int) -> Callable[[], None]:
    """One bare SGD step (index the batch, forward, cross-entropy, backward, w -= lr g) on
    random data: the floor's step and the bare mesh's."""
    data = torch.rand(1024, *INPUT)
    labels = torch.randint(0, CLASSES, (1024,))
    params = list(model.parameters())
    gen = torch.Generator().manual_seed(seed)

    def step() -> None:
        idx = torch.randint(0, 1024, (BATCH,), generator=gen)
        model.zero_grad(set_to_none=False)
        F.cross_entropy(model(data[idx]), labels[idx]).backward()
        with torch.no_grad():
            for p in params:
                p.sub_(p.grad, alpha=LR)  # type: ignore[arg-type]

    return step


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


# --- the bare mesh: the same rounds with no framework -----------------------------------------

HEADER = struct.Struct("<II")  # round, sender


def flat_parameters(model: torch.nn.Module) -> torch.Tensor:
    """The model's parameters copied into one flat tensor and made views of it, so a step
    updates the vector that is sent and the mix writes the parameters in one copy."""
    params = list(model.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    offset = 0
    for p in params:
        p.data = flat[offset:offset + p.numel()].view_as(p)
        offset += p.numel()
    return flat


def _bare_node(node: int, nodes: int, spec: dict[str, Any], rounds: int,
               link: Connection) -> None:
    """One node of the bare mesh: bind, trade endpoints with the parent, run the rounds, send
    the per-round seconds and CPU, and wait for the parent's stop before closing, so that no
    neighbour still waits for a message in flight. Each message to the parent is ("ok",
    value) or ("failed", traceback)."""
    torch.set_num_threads(1)
    ctx = zmq.Context()
    try:
        pull = ctx.socket(zmq.PULL)
        pull.bind("tcp://127.0.0.1:*")
        link.send(("ok", pull.getsockopt_string(zmq.LAST_ENDPOINT)))
        endpoints: list[str] = link.recv()
        neighbours = [(node - 1) % nodes, (node + 1) % nodes]
        pushes = []
        for peer in neighbours:
            push = ctx.socket(zmq.PUSH)
            push.connect(endpoints[peer])
            pushes.append(push)
        link.send(("ok", bare_rounds(node, neighbours, spec, rounds, pull, pushes)))
        link.recv()
    except Exception:
        link.send(("failed", traceback.format_exc()))
    finally:
        ctx.destroy(linger=0)


def bare_rounds(node: int, neighbours: list[int], spec: dict[str, Any], rounds: int,
                pull: zmq.Socket[bytes], pushes: list[zmq.Socket[bytes]],
                ) -> tuple[list[float], list[float]]:
    """The node's rounds: wall and CPU seconds of each. A neighbour is at most one round
    ahead (it needs this node's message to finish a round), so a message of the next round
    waits in the other half of a two-round inbox; mixing takes self, then the neighbours in
    a fixed order, as the floor's mix does."""
    model = build_model(spec, INPUT, CLASSES, seed=0)
    flat = flat_parameters(model)
    step = sgd_step(model, node)
    slots = {peer: slot for slot, peer in enumerate(neighbours)}
    inbox = [[torch.empty_like(flat) for _ in neighbours] for _ in range(2)]
    arrived: set[tuple[int, int]] = set()
    size = flat.numel() * flat.element_size()
    weight = 1.0 / (len(neighbours) + 1)
    seconds, cpu = [], []
    for r in range(rounds):
        began, cpu_began = time.perf_counter(), time.process_time()
        step()
        payload = flat.numpy().tobytes()
        for push in pushes:
            push.send_multipart([HEADER.pack(r, node), payload], copy=False)
        while any((r, slot) not in arrived for slot in slots.values()):
            sent_round, sender = HEADER.unpack(pull.recv())
            slot = slots[sender]
            if sent_round not in (r, r + 1) or (sent_round, slot) in arrived \
                    or not pull.getsockopt(zmq.RCVMORE):
                raise RuntimeError(f"node {node} in round {r}: unexpected message of round "
                                   f"{sent_round} from {sender}")
            if pull.recv_into(inbox[sent_round % 2][slot].numpy()) != size:
                raise RuntimeError(f"node {node}: a message from {sender} is not {size} bytes")
            arrived.add((sent_round, slot))
        with torch.no_grad():
            acc = torch.zeros_like(flat)
            acc.add_(flat, alpha=weight)
            for slot in range(len(neighbours)):
                acc.add_(inbox[r % 2][slot], alpha=weight)
                arrived.remove((r, slot))
            flat.copy_(acc)
        seconds.append(time.perf_counter() - began)
        cpu.append(time.process_time() - cpu_began)
    return seconds, cpu


def _from_node(node: int, link: Connection, proc: multiprocessing.process.BaseProcess,
               deadline: float) -> Any:
    """The node's next message; an error if it sent one, died or the run's time ran out."""
    wait([link, proc.sentinel], max(deadline - time.monotonic(), 0.0))
    if link.poll():
        outcome, value = link.recv()
        if outcome != "ok":
            raise RuntimeError(f"bare mesh node {node} failed:\n{value}")
        return value
    if not proc.is_alive():
        raise RuntimeError(f"bare mesh node {node} died (exit code {proc.exitcode})")
    raise TimeoutError(f"bare mesh node {node}: no answer within {BARE_TIMEOUT_S:g} s")


def bare_mesh(model: str, nodes: int, rounds: int) -> tuple[float, float]:
    """A ring of `nodes` bare processes for `rounds` rounds: (seconds per round, CPU seconds
    per node-round), each the mean over nodes per round, then the median over rounds after
    the first, as the nodes' `round_seconds` and `round_cpu_seconds` are summarised."""
    if nodes < 3:
        raise ValueError(f"a bare ring needs 3 nodes or more, not {nodes}")
    fork = multiprocessing.get_context("fork")
    deadline = time.monotonic() + BARE_TIMEOUT_S
    links: list[Connection] = []
    procs: list[multiprocessing.process.BaseProcess] = []
    stopped = False
    try:
        for node in range(nodes):
            here, there = fork.Pipe()
            links.append(here)
            procs.append(fork.Process(target=_bare_node, daemon=True,
                                      args=(node, nodes, MODELS[model], rounds, there)))
            procs[-1].start()
            there.close()
        endpoints = [_from_node(i, links[i], procs[i], deadline) for i in range(nodes)]
        for link in links:
            link.send(endpoints)
        results = [_from_node(i, links[i], procs[i], deadline) for i in range(nodes)]
        for link in links:
            link.send("stop")
        stopped = True
    finally:
        for proc in procs:
            if stopped:
                proc.join(10)
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for link in links:
            link.close()
    per_round = [statistics.mean(run[0][r] for run in results) for r in range(1, rounds)]
    cpu = [statistics.mean(run[1][r] for run in results) for r in range(1, rounds)]
    return statistics.median(per_round), statistics.median(cpu)


@dataclass
class Bare:
    """The bare mesh's samples: seconds per round and CPU seconds per node-round, per run."""

    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


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


def figures(quick: bool, whole: bool = True) -> list[Figure]:
    """Without `whole` (the quick suite's short part), ring20 alone and a row that says so."""
    require_data("fmnist", None)
    mode, sizes = (QUICK, QUICK_SIZES) if quick else (FULL, FULL_SIZES)
    found: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="dfl-bench-round-cost-") as tmp:
        work = Path(tmp)
        topologies = [ROOT / "topologies" / "ring20.yaml", *([er50(work)] if whole else [])]
        for model in MODELS:
            found += model_figures(model, topologies, sizes, mode, work)
    return found if whole else [*found, not_measured(
        "round_cost", "skipped", "--full only (or --only round_cost): the ER(50, 0.1) rows")]


def model_figures(model: str, topologies: list[Path], sizes: Sizes, mode: Mode,
                  work: Path) -> list[Figure]:
    """One model's meshes, interleaved with raw pyzmq at its message size and, with ring20,
    the bare mesh; then the floor."""
    meshes = [Mesh(model, t, sizes.rounds[model], work) for t in topologies]
    raws: list[Raw] = []
    message = param_bytes(MODELS[model])
    bare = Bare()

    def raw_sample() -> float:
        raws.append(raw_zmq(message))
        return raws[-1].throughput

    def bare_sample() -> float:
        seconds, cpu = bare_mesh(model, RING_NODES, sizes.rounds[model])
        bare.cpu.append(cpu)
        return seconds

    runs: dict[str, Callable[[], float]] = {"raw": raw_sample}
    runs.update({m.name: m for m in meshes})
    if any(m.topology.stem == RING for m in meshes):
        runs["bare"] = bare_sample
    samples = interleaved(runs, mode.reps)
    raw = Raw(median(samples["raw"]), median([r.cpu_per_byte for r in raws]))
    bare.seconds = samples.get("bare", [])
    profiled = profile(meshes[0], work)
    found = []
    for mesh in meshes:
        degrees = mesh.degrees()
        floor = floor_of(model, degrees, sizes.floor_steps[model])
        ring = mesh.topology.stem == RING
        found.append(figure(mesh, degrees, floor, raw, samples[mesh.name], mode,
                            profiled if mesh is meshes[0] else {}, bare if ring else None))
        if ring:
            found.append(bare_figure(found[-1], model, bare, mode))
        if model == "MLP" and ring:
            found.append(framework_figure(found[-2]))
    return found


def profile(mesh: Mesh, work: Path) -> dict[str, float]:
    """One more run with node PROFILE_NODE under cProfile on its CPU clock (not timed)."""
    twin = Mesh(mesh.model, mesh.topology, mesh.rounds, work)
    twin({"DFL_MESH_PROFILE": str(PROFILE_NODE), "DFL_MESH_PROFILE_CLOCK": "cpu"}, "-profiled")
    prof = work / f"{twin.key}-profiled-1" / "profile" / f"node-{PROFILE_NODE}.prof"
    return profile_buckets(prof, mesh.rounds) if prof.exists() else {}


def figure(mesh: Mesh, degrees: list[int], floor: Floor, raw: Raw, seconds: list[float],
           mode: Mode, buckets: dict[str, float], bare: Bare | None = None) -> Figure:
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
    if bare is not None:
        bare_s = median(bare.seconds)
        extra.update({
            "bare_round_s": bare_s,
            "bare_cpu_per_node_round_ms": median(bare.cpu) * 1e3,
            "bare_over_floor": bare_s / floor_s,
            "mesh_over_bare": median(seconds) / bare_s,
            "framework_minus_bare_cpu_ms": (median(mesh.cpu) - median(bare.cpu)) * 1e3,
            "bare_samples_s": ", ".join(f"{s:.4f}" for s in bare.seconds),
        })
    ring20 = mesh.topology.stem == RING
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


def bare_figure(round_figure: Figure, model: str, bare: Bare, mode: Mode) -> Figure:
    """The bare mesh beside the same floor as the framework's round (`figure` has put the
    comparisons into the round's extra fields)."""
    extra = round_figure.extra
    keys = ("bare_cpu_per_node_round_ms", "bare_over_floor", "mesh_over_bare",
            "framework_minus_bare_cpu_ms", "bare_samples_s")
    note = (f"{mode.note}; {RING_NODES} processes of one bare SGD step, flat parameters to both "
            f"neighbours over pyzmq PUSH/PULL, mix; CPU "
            f"{float(extra['bare_cpu_per_node_round_ms']):.2f} ms per node-round; the "
            f"framework's round is {float(extra['mesh_over_bare']):.2f}x this, "
            f"{float(extra['framework_minus_bare_cpu_ms']):+.2f} ms CPU per node-round")
    return compare("round_cost", f"bare pyzmq+torch mesh, {model} {RING} (no framework)",
                   float(extra["bare_round_s"]), "s", round_figure.reference,
                   float(round_figure.reference_value or 0.0), goal_max=None,
                   reps=len(bare.seconds), note=note, extra={k: extra[k] for k in keys})


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
