"""Round cost: a real round of learning beside the bare mesh doing the same work, in the same run.

`python -m bench.round_cost [--full]` runs D-PSGD (adapt-then-combine, one SGD step of batch 8
per round, IID Fashion-MNIST, one torch thread per node, no checkpoints, evaluation only at the
end) with the MLP (784-64-10, 50,890 parameters) and the DMFL-SQ CNN (1,630,090), one process
per node over ZeroMQ, on ring20 and on ER(50, 0.1), and beside each of these four the bare mesh
(bench/bare_mesh.py): one process per node of the same graph, forked after `import torch, zmq`,
each round one bare SGD step on a flat parameter vector, that vector to every neighbour over
pyzmq PUSH/PULL and the neighbours' mixed in with the same Metropolis weights, and nothing
else. The two run in turn (bench/figures.py: interleaved repetitions), so each pair sees the
same minute of a shared machine. For both, alike:

- steady seconds per round: the median over rounds after the first (which also waits for the
  slowest node's start) of the mean over nodes of each round's wall seconds (dfl-mesh:
  `summary.json` `round_seconds`; the bare mesh prints the same), and rounds/s its inverse;
- CPU per node-round, summarised the same way (`round_cpu_seconds`: every thread of the node's
  process from the round's start to its end, so ZeroMQ's I/O thread and the kernel's share on
  the process's behalf count);
- PSS per node, the largest node read over the run: /proc/PID/smaps_rollup of one node every
  half second, in turn, while every node is alive (bench/startup.py's Memory). One read costs
  a torch process about 15 ms of CPU (it walks every mapping), so the timed runs read few.

The figures are dfl-mesh's over the bare mesh's: its round over the bare round, and the
framework's CPU per node-round, dfl-mesh's minus the bare mesh's. The goals (ROUND_GOALS,
FRAMEWORK_CPU_GOALS_MS) hold on ring20; ER(50, 0.1) is measured against its own bare mesh with
no goal.

Beside them, as context: the floor, each node's round work timed in this one process with
nothing around it (the bare step, the mixing sum over the node's degree, and the mesh's bytes at
raw pyzmq DEALER->ROUTER speed between two fresh processes, measured in turn with the meshes):
floor = nodes * (step + mix) / min(cores, nodes) + mesh bytes / raw throughput. It leaves out
what the operating system charges many processes sharing few cores, which the bare mesh pays:
the bare round over the floor is that charge, and a node's CPU minus its floor work (step, mix,
its bytes at raw pyzmq's CPU per byte; this group's framework figure before the bare mesh
became the reference) is the framework's share plus that charge.

Where the framework's share goes: one more run profiles node 0's rounds under cProfile on the
thread's CPU clock (`DFL_MESH_PROFILE_CLOCK=cpu`) and splits them into buckets, for the MLP on
ring20 (with --full for the CNN too). cProfile slows Python code far more than torch kernels,
so the shares overstate the Python parts; the CPU figures above are unprofiled.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch
import zmq

from bench import bare_mesh
from bench.bare_mesh import CLASSES, INPUT, sgd_step
from bench.figures import Figure, Mode, compare, interleaved, median, module_main, not_measured
from bench.launch import ROOT, launch, require_data
from bench.overhead import er50
from bench.startup import Memory, Tree, machine, run, watch
from dfl_node.learning.models import build_model

MODELS: dict[str, dict[str, Any]] = {"MLP": {"name": "mlp", "hidden": [64]},
                                     "CNN": {"name": "dmflsq-cnn"}}
GOAL_TOPOLOGY = "ring20"  # the graph the goals hold on
ROUND_GOALS = {"MLP": 1.15, "CNN": 1.05}  # dfl-mesh round / bare-mesh round
FRAMEWORK_CPU_GOALS_MS = {"MLP": 0.3}  # dfl-mesh minus bare-mesh CPU per node-round
# PSS read in the timed runs: a read of /proc/PID/smaps_rollup costs a torch process's mesh
# about 15 ms of CPU (it walks every mapping), so one node per half second, in turn
PSS_NODES_PER_SAMPLE = 1
PSS_EVERY_S = 0.5
RAW_BYTES = 64 << 20  # bytes per raw throughput sample
PROFILE_NODE = 0


@dataclass(frozen=True)
class Sizes:
    """How long each run is, per model: rounds of the meshes and steps of the floor; and
    which models' ring20 runs are profiled."""

    rounds: dict[str, int]
    floor_steps: dict[str, int]
    profiled: tuple[str, ...]


QUICK = Mode(reps=2, rounds=0, note="quick: 2 interleaved repetitions")
FULL = Mode(reps=4, rounds=0, note="full: 4 interleaved repetitions")
QUICK_SIZES = Sizes({"MLP": 60, "CNN": 6}, {"MLP": 400, "CNN": 40}, ("MLP",))
FULL_SIZES = Sizes({"MLP": 150, "CNN": 25}, {"MLP": 1000, "CNN": 100}, ("MLP", "CNN"))


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
    """Median seconds of one bare SGD step on a random batch (the bare mesh's step)."""
    return timed(sgd_step(build_model(spec, INPUT, CLASSES, seed=0), 0), steps)


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


# --- the two systems on one graph --------------------------------------------------------------

@dataclass
class Side:
    """One system's runs on one graph: per run, steady seconds per round, CPU seconds per
    node-round, and the largest PSS of a node (MB) with how many nodes were read."""

    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    pss_mb: list[float] = field(default_factory=list)
    nodes_read: list[int] = field(default_factory=list)

    def add(self, summary: dict[str, Any], memory: Memory) -> float:
        self.seconds.append(steady(summary["round_seconds"]))
        self.cpu.append(steady(summary["round_cpu_seconds"]))
        self.pss_mb.append(memory.node_mb)
        self.nodes_read.append(len(memory.node_peak_mb))
        return self.seconds[-1]


def steady(per_round: dict[str, float]) -> float:
    """Median over rounds after the first (which also waits for the slowest node's start)."""
    return statistics.median(v for r, v in per_round.items() if r != "0")


@dataclass
class Pair:
    """dfl-mesh and the bare mesh on one graph with one model; `mesh()` and `bare()` are one
    run each, returning its seconds per round."""

    model: str
    topology: Path
    rounds: int
    workdir: Path
    rows: dict[str, dict[str, float]]  # the bare mesh's plan: node -> its Metropolis row
    dfl: Side = field(default_factory=Side)
    bare_side: Side = field(default_factory=Side)

    @classmethod
    def of(cls, model: str, topology: Path, rounds: int, workdir: Path) -> Pair:
        plan = bare_mesh.write_plan(workdir / f"{model}-{topology.stem}-bare.json",
                                    MODELS[model], topology, rounds)
        return cls(model, topology, rounds, workdir, json.loads(plan.read_text())["rows"])

    @property
    def name(self) -> str:
        return f"{self.model} {self.topology.stem}"

    @property
    def key(self) -> str:
        return f"{self.model}-{self.topology.stem}"

    @property
    def nodes(self) -> int:
        return len(self.rows)

    @property
    def degrees(self) -> list[int]:
        return [len(row) - 1 for row in self.rows.values()]

    @property
    def has_goals(self) -> bool:
        return self.topology.stem == GOAL_TOPOLOGY

    def memory(self, tree_of: Callable[[int], Tree]) -> Memory:
        """The nodes' PSS, read in a timed run without the launcher's side."""
        return Memory(self.nodes, tree_of, PSS_NODES_PER_SAMPLE, side=False, every_s=PSS_EVERY_S)

    def mesh(self) -> float:
        run_dir = self.workdir / f"{self.key}-{len(self.dfl.seconds)}"
        memory = self.memory(Tree.of)
        done = run(options(self.model, self.topology, self.rounds), run_dir, memory)
        if done.error:
            raise SystemExit(f"bench.round_cost: {self.name} failed: {done.error}")
        return self.dfl.add(done.summary, memory)

    def bare(self) -> float:
        stem = self.workdir / f"{self.key}-bare-{len(self.bare_side.seconds)}"
        out = stem.with_suffix(".json")
        memory = self.memory(Tree.flat)
        with out.open("wb") as sink:
            code = watch([sys.executable, "-m", "bench.bare_mesh",
                          str(self.workdir / f"{self.key}-bare.json")],
                         stem.with_suffix(".stderr"), sink, memory)
        if code != 0:
            lines = stem.with_suffix(".stderr").read_text(errors="replace").strip().splitlines()
            raise SystemExit(f"bench.round_cost: the bare mesh, {self.name}, failed (exit "
                             f"{code}): {' | '.join(lines[-4:])}")
        return self.bare_side.add(json.loads(out.read_text()), memory)


def options(model: str, topology: Path, rounds: int) -> list[str]:
    spec = json.dumps(MODELS[model])
    return ["--topology", str(topology), "--protocol", "d-psgd", "--rounds", str(rounds),
            "--eval-every", str(rounds), "--dataset", "fmnist", "--partition", "iid",
            "--set", "local_steps=1", "--set", f"batch_size={bare_mesh.BATCH}",
            "--set", "form=atc", "--set", f"lr={bare_mesh.LR}", "--set", f"model={spec}",
            "--set", "checkpoint_every=0", "--set", "torch_threads=1", "--set", "eval_size=256",
            # 50 CNN nodes on 2 shared cores can starve a node for seconds; liveness is not
            # what this group measures
            "--set", "wire.deadline_s=120"]


# --- where a node's round CPU goes ---------------------------------------------------------------

# bucket -> the (file suffix, function) pairs whose cumulative CPU of node 0 it holds, per round;
# the buckets' calls are disjoint (none runs inside another's), so their shares add up
Key = tuple[str, str]
BUCKETS: dict[str, tuple[Key, ...]] = {
    # LocalSGD.step (gradient and update) under atc; a bare gradient (cta) counted where a
    # protocol calls it outside step
    "local step (LocalSGD)": (("protocols/sdk/learning.py", "step"),
                              ("protocols/sdk/learning.py", "gradient")),
    "encode and self-check (Comm._outgoing)": (("dfl_node/comm/channel.py", "_outgoing"),),
    "send (transport)": (("dfl_node/transports/zeromq.py", "send"),),
    "receive (transport)": (("dfl_node/transports/zeromq.py", "recv"),),
    "decode and validation (Comm._accepted)": (("dfl_node/comm/channel.py", "_accepted"),),
    "received tensors": (("dfl_node/comm/received.py", "tensors"),),
    "traffic ledger": (("dfl_node/ledgers/traffic.py", "_record"),),
    "formula ledger": (("dfl_node/ledgers/formula.py", "charge_all"),),
    "virtual clock": (("dfl_node/netsim/virtual_clock.py", "sync_step"),),
    "settle (transport flush)": (("dfl_node/comm/channel.py", "_settle"),),
    "mixing (sdk.mix)": (("protocols/sdk/mixing.py", "mix"),),
    "failure agreement": (("dfl_node/runner/membership.py", "after_round"),),
}
ROUND = ("protocols/gossip/dpsgd.py", "run_round")
DISPATCH = "Python dispatch and the rest (run_round minus the above)"
PROFILED_MS = "profiled CPU per round, ms"


def profile_buckets(prof: Path, rounds: int) -> dict[str, float]:
    """Each bucket's share of node 0's profiled round CPU; the rest is the protocol's own
    Python (and what the buckets do not name)."""
    stats = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]

    def matches(func: tuple[str, int, str], keys: tuple[Key, ...]) -> bool:
        return any(func[0].endswith(file) and func[2] == name for file, name in keys)

    def seconds(keys: tuple[Key, ...]) -> float:
        """Cumulative CPU in `keys`, less their calls from one another (counted once)."""
        total = 0.0
        for func, entry in stats.items():
            if matches(func, keys):
                total += entry[3] - sum(ct for caller, (_, _, _, ct) in entry[4].items()
                                        if matches(caller, keys))
        return total

    total = seconds((ROUND,)) + seconds(BUCKETS["failure agreement"])
    if total <= 0:
        return {}
    shares = {label: seconds(keys) / total for label, keys in BUCKETS.items()}
    shares[DISPATCH] = 1.0 - sum(shares.values())
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
        goal = ROOT / "topologies" / f"{GOAL_TOPOLOGY}.yaml"
        topologies = [goal, *([er50(work)] if whole else [])]
        for model in MODELS:
            found += model_figures(model, topologies, sizes, mode, work)
    return found if whole else [*found, not_measured(
        "round_cost", "skipped", "--full only (or --only round_cost): the ER(50, 0.1) rows")]


def model_figures(model: str, topologies: list[Path], sizes: Sizes, mode: Mode,
                  work: Path) -> list[Figure]:
    """One model's meshes, each beside its bare mesh, interleaved with raw pyzmq at its
    message size; then the floor."""
    pairs = [Pair.of(model, t, sizes.rounds[model], work) for t in topologies]
    raws: list[Raw] = []
    message = param_bytes(MODELS[model])

    def raw_sample() -> float:
        raws.append(raw_zmq(message))
        return raws[-1].throughput

    runs: dict[str, Callable[[], float]] = {"raw": raw_sample}
    for pair in pairs:
        runs.update({pair.name: pair.mesh, f"bare {pair.name}": pair.bare})
    samples = interleaved(runs, mode.reps)
    raw = Raw(median(samples["raw"]), median([r.cpu_per_byte for r in raws]))
    found = []
    for pair in pairs:
        profiled = profile(pair, work) if pair.has_goals and model in sizes.profiled else {}
        floor = floor_of(model, pair.degrees, sizes.floor_steps[model])
        round_row = round_figure(pair, floor, raw, mode, profiled)
        found += [round_row, framework_figure(pair, round_row)]
    return found


def profile(pair: Pair, work: Path) -> dict[str, float]:
    """One more run with node PROFILE_NODE under cProfile on its CPU clock (not timed)."""
    run_dir = work / f"{pair.key}-profiled"
    launch(options(pair.model, pair.topology, pair.rounds), run_dir,
           f"bench.round_cost: {pair.name} (profiled)",
           {"DFL_MESH_PROFILE": str(PROFILE_NODE), "DFL_MESH_PROFILE_CLOCK": "cpu"})
    prof = run_dir / "profile" / f"node-{PROFILE_NODE}.prof"
    return profile_buckets(prof, pair.rounds) if prof.exists() else {}


def round_figure(pair: Pair, floor: Floor, raw: Raw, mode: Mode,
                 buckets: dict[str, float]) -> Figure:
    """dfl-mesh's round over the bare mesh's, with both systems' rounds/s, CPU per node-round
    and PSS per node side by side, and the floor as context."""
    dfl, bare = pair.dfl, pair.bare_side
    degrees = pair.degrees
    cores = min(os.cpu_count() or 1, pair.nodes)
    compute = sum(floor.step + floor.mix[d] for d in degrees) / cores
    mesh_bytes = sum(degrees) * floor.message_bytes
    floor_s = compute + mesh_bytes / raw.throughput
    node_floor_cpu = statistics.mean(
        floor.step + floor.mix[d] + d * floor.message_bytes * raw.cpu_per_byte for d in degrees)
    dfl_s, bare_s = median(dfl.seconds), median(bare.seconds)
    dfl_cpu, bare_cpu = median(dfl.cpu), median(bare.cpu)
    extra: dict[str, float | str] = {
        "nodes": float(pair.nodes), "mean_degree": statistics.mean(degrees),
        "rounds_per_s": 1 / dfl_s, "bare_rounds_per_s": 1 / bare_s,
        "cpu_per_node_round_ms": dfl_cpu * 1e3, "bare_cpu_per_node_round_ms": bare_cpu * 1e3,
        "framework_cpu_per_node_round_ms": (dfl_cpu - bare_cpu) * 1e3,
        "pss_per_node_MB": median(dfl.pss_mb), "bare_pss_per_node_MB": median(bare.pss_mb),
        "samples_s": ", ".join(f"{s:.4f}" for s in dfl.seconds),
        "bare_samples_s": ", ".join(f"{s:.4f}" for s in bare.seconds),
        "pss_samples_MB": ", ".join(f"{m:.1f}" for m in dfl.pss_mb),
        "bare_pss_samples_MB": ", ".join(f"{m:.1f}" for m in bare.pss_mb),
        "nodes_read": ", ".join(map(str, dfl.nodes_read)),
        "bare_nodes_read": ", ".join(map(str, bare.nodes_read)),
        "floor_s": floor_s, "floor_step_ms": floor.step * 1e3,
        "floor_mix_ms": statistics.mean(floor.mix[d] for d in degrees) * 1e3,
        "floor_compute_s": compute, "floor_bytes_s": mesh_bytes / raw.throughput,
        "message_bytes": float(floor.message_bytes),
        "raw_throughput_GBps": raw.throughput / 1e9,
        "raw_cpu_ns_per_byte": raw.cpu_per_byte * 1e9,
        "round_over_floor": dfl_s / floor_s, "bare_round_over_floor": bare_s / floor_s,
        "cpu_minus_floor_work_ms": (dfl_cpu - node_floor_cpu) * 1e3,
        "bare_cpu_minus_floor_work_ms": (bare_cpu - node_floor_cpu) * 1e3,
        **{f"profile: {k}": round(v, 4) for k, v in buckets.items()},
    }
    note = (f"{mode.note}; {machine()}; dfl-mesh | bare: {1 / dfl_s:.3g} | {1 / bare_s:.3g} "
            f"rounds/s, CPU {dfl_cpu * 1e3:.3g} | {bare_cpu * 1e3:.3g} ms per node-round, PSS "
            f"{median(dfl.pss_mb):.3g} | {median(bare.pss_mb):.3g} MB per node (largest)")
    if buckets:
        top = sorted(((v, k) for k, v in buckets.items() if k != PROFILED_MS), reverse=True)
        note += "; node 0's round CPU: " + ", ".join(f"{k} {v:.0%}" for v, k in top[:5])
    return compare("round_cost", f"D-PSGD round, {pair.name}: dfl-mesh / bare mesh", dfl_s, "s",
                   "bare pyzmq+torch mesh: same graph, weights and step, same run", bare_s,
                   goal_max=ROUND_GOALS[pair.model] if pair.has_goals else None,
                   reps=len(dfl.seconds), note=note, extra=extra)


def framework_figure(pair: Pair, round_row: Figure) -> Figure:
    """The framework's CPU per node-round: dfl-mesh's minus the bare mesh's, over the bare
    mesh's (the ratio), with its goal where it has one."""
    extra = round_row.extra
    value = float(extra["framework_cpu_per_node_round_ms"])
    bare = float(extra["bare_cpu_per_node_round_ms"])
    goal = FRAMEWORK_CPU_GOALS_MS.get(pair.model) if pair.has_goals else None
    return Figure("round_cost", f"framework CPU per node-round, {pair.name}", value, "ms",
                  "bare mesh's CPU per node-round", bare, value / bare,
                  f"<= {goal:g}" if goal is not None else "",
                  value <= goal if goal is not None else None, round_row.reps,
                  f"dfl-mesh {float(extra['cpu_per_node_round_ms']):.3g} ms minus bare "
                  f"{bare:.3g} ms; before the bare mesh, CPU minus floor work: "
                  f"{float(extra['cpu_minus_floor_work_ms']):.3g} ms (bare: "
                  f"{float(extra['bare_cpu_minus_floor_work_ms']):.3g})")


def main() -> None:
    module_main(figures, __doc__, "4 repetitions of longer runs")


if __name__ == "__main__":
    main()
