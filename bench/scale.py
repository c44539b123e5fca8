"""Scale: the largest ring this machine runs, what each node costs in memory, how fast it starts.

`python -m bench.scale [--full]` launches d-psgd rings of 20, 100 and 200 nodes with the
protocol's defaults (real Fashion-MNIST, the default CNN; evaluation only after the last round,
which always evaluates), one process per node over ZeroMQ, and measures:
- the largest ring that finishes (goal: 200 nodes);
- whether a ring of MLP_RING nodes with the small MLP (784-64-10) runs MLP_ROUNDS rounds on this
  machine (goal: 500 nodes on 2 cores and 24 GiB), with its memory, in both modes when the
  group runs whole (IID data: the default Dirichlet split cannot give 500 nodes its minimum of
  64 samples each);
- from `dfl-launch` starting to every node ready (data, model, sockets), and to every node
  having finished round 1 (the start barrier and one round on top), from the run's own
  records (`summary.json` `started_at`, `startup_seconds`, `first_round_seconds`) and the
  moment this script started the launcher. Goal: 100 nodes ready in under 15 s;
- the mesh's PSS (proportional set size: shared pages split among their sharers, so the sum is
  what the mesh really holds): per node at its peak, sampled through the run from
  /proc/PID/smaps_rollup (up to SAMPLE_NODES nodes a sample), and for the mesh that times the
  ring's size plus the forkserver;
- as the reference for both, fresh `python -c "import torch"` interpreters (FRESH of them,
  started at once, as a one-interpreter-per-node design would), in the same run: their time
  until all are up and their PSS each. Absolute numbers depend on the machine and its load;
  the ratios are the figures.

Quick: each ring once, QUICK.rounds rounds. Full: the rings in turn FULL.reps times
(bench/figures.py: interleaved repetitions), 10 rounds each. `python -m bench --quick` runs only
the rings of SHORT_SIZES (20 nodes: bench.startup starts 100 already), without the MLP ring,
the largest-ring figure and the 100- and 200-node rings (`whole=False`; its row says so): those
take most of the group's minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.figures import Figure, Mode, compare, median, module_main, not_measured
from bench.launch import ROOT, later_rounds, launch_command, require_data
from topologies.generators import ring
from topologies.writer import write_topology

SIZES = (20, 100, 200)
SHORT_SIZES = (20,)  # the quick suite's: bench.startup starts 100 nodes already
GOAL_NODES = 200
READY_GOAL = (100, 15.0)  # (nodes, seconds): 100 nodes ready within 15 s
FRESH = 20  # fresh torch interpreters started at once (100 of them take minutes here)
SAMPLE_S = 0.5  # PSS sampling period (a 2-round run of 20 nodes lasts a few seconds)
SAMPLE_NODES = 10  # nodes read per PSS sample (one read took 0.5 s on a loaded machine)
MIN_READ = 0.9  # the share of them a sample must read
RUN_TIMEOUT_S = 1800.0
MLP_RING = 500
MLP_ROUNDS = 10
MLP = '{"name": "mlp", "hidden": [64]}'


QUICK = Mode(reps=1, rounds=2, note="quick: each ring once, 2 rounds")
FULL = Mode(reps=2, rounds=10, note="full: 2 interleaved repetitions, 10 rounds")


# --- memory -------------------------------------------------------------------------------------

def pss_mb(pid: int) -> float | None:
    """PSS of `pid` in MB, None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class MeshMemory:
    """Peak PSS per node of a mesh, over samples of up to SAMPLE_NODES evenly spaced nodes,
    and the forkserver's PSS at that peak. Reading smaps_rollup walks a process's page tables
    (hundreds of MB of shared torch mappings in every node): 40 of them took 22 s on a loaded
    machine, longer than a short run lasts, so a sample reads a few nodes of the ring (all of
    its nodes run the same code on the same amount of data) and the mesh's total is their mean
    times the ring's size."""

    node_pids: dict[int, int] = field(default_factory=dict)  # node id -> pid
    peak_per_node_mb: float = float("nan")
    forkserver_mb: float = 0.0
    nodes: int = 0
    sampled: int = 0  # nodes read in the peak sample

    def find_pids(self, run_dir: Path) -> None:
        """Each node's first log line names its pid ("node I pid P binds ...")."""
        for log in (run_dir / "logs").glob("node-*.log"):
            node = int(log.stem.split("-")[1])
            if node in self.node_pids:
                continue
            words = log.read_text().split("\n", 1)[0].split()
            if len(words) >= 4 and words[2] == "pid":
                self.node_pids[node] = int(words[3])

    def sample(self, nodes: int) -> None:
        """One sample once every node has started, kept if nearly every node read was alive
        (MIN_READ: one that is exiting has no memory map left to read) and its mean is the
        largest so far."""
        if len(self.node_pids) < nodes:
            return
        ids = sorted(self.node_pids)
        chosen = sorted({ids[i * nodes // min(nodes, SAMPLE_NODES)]
                         for i in range(min(nodes, SAMPLE_NODES))})
        sizes = [size for size in (pss_mb(self.node_pids[i]) for i in chosen) if size is not None]
        if len(sizes) < MIN_READ * len(chosen):
            return
        mean = sum(sizes) / len(sizes)
        if not mean <= self.peak_per_node_mb:  # also replaces the initial NaN
            server = parent_pid(self.node_pids[chosen[0]])
            self.peak_per_node_mb = mean
            self.forkserver_mb = (pss_mb(server) if server else None) or 0.0
            self.nodes, self.sampled = nodes, len(sizes)

    @property
    def total_mb(self) -> float:
        return self.peak_per_node_mb * self.nodes + self.forkserver_mb


# --- one mesh -----------------------------------------------------------------------------------

@dataclass
class Launch:
    """One ring run: times from the launcher's start, its memory; `error` if it failed."""

    nodes: int
    ready_s: float = float("nan")
    first_round_s: float = float("nan")
    round_s: float = float("nan")  # mean wall seconds of a round after the first, per node
    memory: MeshMemory = field(default_factory=MeshMemory)
    error: str = ""


def launch(nodes: int, rounds: int, workdir: Path, tag: str,
           options: tuple[str, ...] = ()) -> Launch:
    """Run a ring of `nodes` for `rounds` rounds (d-psgd's defaults, then `options`),
    sampling its memory until it exits."""
    topo = workdir / f"ring{nodes}.yaml"
    if not topo.exists():
        write_topology(ring(nodes), topo)
    run_dir = workdir / f"ring{nodes}-{tag}"
    cmd = launch_command(["--topology", str(topo), "--protocol", "d-psgd", "--rounds",
                          str(rounds), "--eval-every", str(rounds), *options], run_dir)
    result = Launch(nodes)
    err_path = workdir / f"ring{nodes}-{tag}.stderr"  # a file: a pipe nobody reads can fill up
    began = time.time()
    with err_path.open("wb") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        while proc.poll() is None and time.time() - began < RUN_TIMEOUT_S:
            result.memory.find_pids(run_dir)
            result.memory.sample(nodes)
            time.sleep(SAMPLE_S)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    summary_path = run_dir / "summary.json"
    if proc.returncode != 0 or not summary_path.exists():
        lines = err_path.read_text(errors="replace").strip().splitlines()
        result.error = " | ".join(lines[-6:]) or f"exit status {proc.returncode}"
        return result
    timed(result, json.loads(summary_path.read_text()), began)
    return result


def timed(result: Launch, summary: dict[str, Any], began: float) -> None:
    """The launch's times from its summary, shifted to count from the launcher's start."""
    offset = summary["started_at"] - began  # launcher start-up, plan and data before spawning
    result.ready_s = offset + summary["startup_seconds"]
    result.first_round_s = offset + summary["first_round_seconds"]
    later = later_rounds(summary)
    result.round_s = median(later) if later else float("nan")


# --- the reference: fresh interpreters ----------------------------------------------------------

@dataclass(frozen=True)
class Fresh:
    count: int
    all_up_s: float
    pss_mb: float  # mean PSS of one, all `count` alive


def fresh_torch(count: int) -> Fresh:
    """`count` fresh interpreters importing torch, started at once: time until all are up and
    their PSS each, measured while all are alive (they share libtorch's file pages as a
    process-per-node design without a forkserver would)."""
    code = "import sys, torch; print('up', flush=True); sys.stdin.read()"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    started = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env=env) for _ in range(count)]
    for p in procs:
        assert p.stdout is not None
        p.stdout.readline()
    elapsed = time.monotonic() - started
    sizes = [s for s in (pss_mb(p.pid) for p in procs) if s is not None]
    for p in procs:
        assert p.stdin is not None
        p.stdin.close()
        p.wait()
    return Fresh(count, elapsed, sum(sizes) / len(sizes))


# --- figures ------------------------------------------------------------------------------------

def figures(quick: bool, whole: bool = True) -> list[Figure]:
    """The group's figures; without `whole` (the quick suite's short part) only the rings of
    SHORT_SIZES, and a row for what is left out."""
    require_data("fmnist", None)  # a SKIPPED row, not minutes of runs, without it
    mode = QUICK if quick else FULL
    sizes = SIZES if whole else SHORT_SIZES
    runs: dict[int, list[Launch]] = {n: [] for n in sizes}
    fresh: list[Fresh] = []
    with tempfile.TemporaryDirectory(prefix="dfl-bench-scale-") as tmp:
        for rep in range(mode.reps):
            fresh.append(fresh_torch(FRESH))
            for n in sizes:
                runs[n].append(launch(n, mode.rounds, Path(tmp), str(rep)))
        mlp = launch(MLP_RING, MLP_ROUNDS, Path(tmp), "mlp",
                     ("--set", f"model={MLP}", "--partition", "iid")) if whole else None
    ok = {n: [r for r in rs if not r.error] for n, rs in runs.items()}
    ref = Fresh(FRESH, median([f.all_up_s for f in fresh]), median([f.pss_mb for f in fresh]))
    figs = [largest_figure(runs, mode)] if whole else []
    figs += [mlp_ring_figure(mlp)] if mlp is not None else []
    for n in sizes:
        if ok[n]:
            figs += mesh_figures(n, ok[n], ref, mode)
    if not whole:
        left_out = ", ".join(str(n) for n in SIZES if n not in SHORT_SIZES)
        figs.append(not_measured(
            "scale", "skipped", f"--full only (or --only scale): the largest ring, the CNN "
            f"rings of {left_out} nodes and the MLP ring of {MLP_RING} (minutes each)"))
    return figs


def largest_figure(runs: dict[int, list[Launch]], mode: Mode) -> Figure:
    largest = max((n for n, rs in runs.items() if rs and not any(r.error for r in rs)),
                  default=0)
    errors = {f"ring{n} error": r.error for n, rs in runs.items() for r in rs if r.error}
    return compare("scale", f"largest ring run (d-psgd, FMNIST CNN, {mode.rounds} rounds)",
                   largest, "nodes", "goal", GOAL_NODES, goal_min=1.0, reps=mode.reps,
                   note=f"{mode.note}; {machine()}", extra=errors)


def mlp_ring_figure(run: Launch) -> Figure:
    """The MLP ring: its size if it ran every round, 0 if it failed (the error says why)."""
    extra: dict[str, float | str] = {"error": run.error} if run.error else {
        "first_round_s": run.first_round_s, "round_s_after_first": run.round_s,
        "peak_pss_per_node_MB": run.memory.peak_per_node_mb,
        "mesh_pss_GB": run.memory.total_mb / 1024, "machine_memory_GB": memory_gb()}
    return compare("scale", f"MLP ring{MLP_RING}: {MLP_ROUNDS} rounds (d-psgd, MLP 784-64-10)",
                   0 if run.error else MLP_RING, "nodes", "goal", MLP_RING, goal_min=1.0,
                   note=machine(), extra=extra)


def mesh_figures(n: int, runs: list[Launch], ref: Fresh, mode: Mode) -> list[Figure]:
    note = f"{mode.note}; {machine()}"
    ready = median([r.ready_s for r in runs])
    first = median([r.first_round_s for r in runs])
    per_node = median([r.memory.peak_per_node_mb for r in runs])
    total = median([r.memory.total_mb for r in runs])
    samples = ", ".join(f"{r.ready_s:.1f}/{r.first_round_s:.1f}" for r in runs)
    extra: dict[str, float | str] = {"ready/first_round_samples_s": samples,
                                     f"fresh_{ref.count}_interpreters_up_s": ref.all_up_s,
                                     "round_s_after_first": median([r.round_s for r in runs])}
    return [
        start_figure(f"ring{n}: launcher start to all nodes ready", ready, n, ref, note,
                     len(runs), extra, goal=n == READY_GOAL[0]),
        start_figure(f"ring{n}: launcher start to round 1 done on every node", first, n, ref,
                     note, len(runs), extra, goal=False),
        compare("scale", f"ring{n}: PSS per node (peak of the run)", per_node, "MB",
                "PSS of one fresh torch interpreter", ref.pss_mb, reps=len(runs), note=note,
                extra={"nodes_per_sample": median([r.memory.sampled for r in runs])}),
        compare("scale", f"ring{n}: PSS of the mesh (peak per node x {n} + forkserver)",
                total / 1024, "GB", f"{n} fresh torch interpreters", n * ref.pss_mb / 1024,
                reps=len(runs), note=note,
                extra={"machine_memory_GB": memory_gb(),
                       "forkserver_MB": median([r.memory.forkserver_mb for r in runs])}),
    ]


def start_figure(name: str, seconds: float, n: int, ref: Fresh, note: str, reps: int,
                 extra: dict[str, float | str], goal: bool) -> Figure:
    """Against the 15-s goal (`goal`), else against as many fresh interpreters when they were
    measured, else with no reference (the fresh interpreters' time stays in `extra`)."""
    if goal:
        return compare("scale", name, seconds, "s", f"goal: {n} nodes in {READY_GOAL[1]:g} s",
                       READY_GOAL[1], goal_max=1.0, reps=reps, note=note, extra=extra)
    if n == ref.count:
        return compare("scale", name, seconds, "s",
                       f"{ref.count} fresh torch interpreters started at once", ref.all_up_s,
                       reps=reps, note=note, extra=extra)
    return Figure("scale", name, seconds, "s", reps=reps, note=note, extra=dict(extra))


def memory_gb() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def machine() -> str:
    return f"{os.cpu_count()} cores, {memory_gb():.1f} GiB, load {os.getloadavg()[0]:.1f}"


def main() -> None:
    module_main(figures, __doc__, "2 repetitions of 10-round runs")


if __name__ == "__main__":
    main()
