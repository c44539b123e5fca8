"""Start-up and memory as a user meets them: from the command to every node in round 1, and
what the launcher, the process its nodes are forked from and each node hold.

`python -m bench.startup [--full]` runs the workload a user tries first (d-psgd on a ring, IID
Fashion-MNIST, one SGD step of batch 8 per round, adapt-then-combine, the MLP with one hidden
layer of 64, no checkpoints; the data cache warmed by one run before any is timed, and the
bytecode caches too: every command here runs without PYTHONDONTWRITEBYTECODE, which some
machines set, so the warm-up writes the project's .pyc files as a user's first launch does and
each timed start reads them, as a user's next one does) and measures:

- start-up: from starting `python -m launcher.cli ...` (what `dfl-launch` runs) to the last
  node past its first exchange, i.e. done with its first round (the run's own record:
  `summary.json` `started_at` plus `first_round_seconds`, the nodes' Unix time, minus the
  instant this script started the command), on a ring of 20 and of 100, interleaved
  (bench/figures.py: interleaved repetitions) with the bare mesh's own start on the same ring
  (`python -m bench.bare_mesh PLAN` with a one-round plan of the same ring and model: import
  torch, fork the nodes, connect them over pyzmq PUSH/PULL, every node past its first
  exchange; bench/bare_mesh.py) and a bare
  `python -c "import torch"`. Goals: 20 nodes within 1.2x and 100 nodes within 1.5x the bare
  mesh's start. The last node beginning round 1 (`first_round_start_seconds`) and the phases
  before it are given beside;
- memory, for the MLP and for `dmflsq-cnn`, on ring20 with enough rounds to be sampled in its
  rounds: PSS (proportional set size: a page shared by k processes counts 1/k in each, so the
  sum over processes is what the mesh holds) from /proc/PID/smaps_rollup, read by walking the
  launcher's process tree while every node is alive. Per node (the largest peak of any node
  read), against 30 MB plus three times the model's parameter and optimizer bytes; and of the
  launcher with its helpers (the process the nodes are forked from, "forkserver" in the
  figures: the zygote, launcher/backends/zygote.py, or multiprocessing's forkserver and
  resource tracker before it), against 400 MB. File-backed pages count in PSS too, and those
  of torch's libraries that only the launcher maps are shared with whatever other torch
  process runs on the machine: the launcher's figure is largest on an otherwise idle machine.
  The PSS of a bare torch interpreter is given beside them.

Absolute seconds depend on the machine's load; the start-up ratios are the figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from bench.bare_mesh import write_plan
from bench.figures import Figure, Mode, compare, interleaved, median, module_main
from bench.launch import ROOT, launch_command
from bench.scale import fresh_torch, pss_mb
from topologies.generators import ring
from topologies.writer import write_topology

GROUP = "startup"
SERVER = "forkserver"  # what the nodes are forked from, however it was started
WORKLOAD = ("--protocol", "d-psgd", "--partition", "iid", "--set", "local_steps=1",
            "--set", "batch_size=8", "--set", "form=atc", "--set", "checkpoint_every=0")
MODELS = {"mlp": "{name: mlp, hidden: [64]}", "dmflsq-cnn": "{name: dmflsq-cnn}"}
# ring size -> (command to every node past its first exchange) / (the bare mesh's, same ring)
RATIO_GOALS = {20: 1.2, 100: 1.5}
NODE_BASE_MB = 30.0  # a node's goal: this plus NODE_MODEL_COPIES x (parameter + optimizer bytes)
NODE_MODEL_COPIES = 3
LAUNCHER_GOAL_MB = 400.0
# Rounds of a memory run: long enough that a few samples fall in the rounds (an MLP round takes
# tens of ms on 2 cores, a CNN round about a second).
MEMORY_ROUNDS = {"mlp": 300, "dmflsq-cnn": 8}
MEMORY_NODES = 20
SAMPLE_S = 0.2
SAMPLE_NODES = 5  # node processes read per sample, in turn (a read walks hundreds of MB of maps)
RUN_TIMEOUT_S = 900.0

QUICK = Mode(reps=2, rounds=2, note="quick: 2 interleaved repetitions, 2-round runs")
FULL = Mode(reps=7, rounds=2, note="full: 7 interleaved repetitions, 2-round runs")


# --- the launcher's process tree ------------------------------------------------------------

def parents() -> dict[int, int]:
    """pid -> parent pid of every process visible now."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1]
                                             .split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return found


def command_line(pid: int) -> str:
    try:
        return (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                .decode(errors="replace"))
    except OSError:
        return ""


@dataclass(frozen=True)
class Tree:
    """The launcher, its helpers and the nodes: the helper with children is the one the nodes
    are forked from (a forkserver, or the zygote forked from the launcher), the others are
    named by their command line (multiprocessing's resource tracker)."""

    launcher: int
    helpers: dict[str, int]
    nodes: list[int]

    @classmethod
    def of(cls, launcher: int) -> Tree:
        ppid = parents()
        kids: dict[int, list[int]] = {}
        for pid, parent in ppid.items():
            kids.setdefault(parent, []).append(pid)
        helpers, nodes = {}, []
        for pid in sorted(kids.get(launcher, [])):
            if kids.get(pid):
                helpers[SERVER] = pid
                nodes = sorted(kids[pid])
            else:
                line = command_line(pid)
                helpers["resource_tracker" if "resource_tracker" in line else f"child {pid}"] = pid
        return cls(launcher, helpers, nodes)

    def all_alive(self) -> bool:
        """Every node still there (as in the tree, a zombie not yet reaped counts): a look at
        the nodes' pids, cheaper than walking /proc again."""
        return all(Path(f"/proc/{pid}").exists() for pid in self.nodes)

    @classmethod
    def flat(cls, parent: int) -> Tree:
        """A mesh whose nodes are forked from `parent` itself (the bare mesh,
        bench/bare_mesh.py): every child a node, no helpers."""
        return cls(parent, {}, sorted(pid for pid, up in parents().items() if up == parent))


@dataclass
class Memory:
    """Peaks over the samples taken while every node was alive (before that the mesh is still
    forming, after it nodes leave and the forkserver's shared pages count more in it)."""

    nodes: int
    tree_of: Callable[[int], Tree] = Tree.of  # how the launcher's tree is read
    per_sample: int = SAMPLE_NODES  # nodes read per sample, in turn
    side: bool = True  # whether the launcher and its helpers are read too
    every_s: float = SAMPLE_S  # the pause between samples
    node_peak_mb: dict[int, float] = field(default_factory=dict)  # pid -> its largest PSS
    side_mb: float = float("nan")  # launcher + helpers, largest sum of one sample
    parts_mb: dict[str, float] = field(default_factory=dict)  # that sample's terms
    samples: int = 0
    turn: int = 0

    def sample(self, launcher: int) -> None:
        tree = self.tree_of(launcher)
        if len(tree.nodes) < self.nodes:
            return
        picked = [tree.nodes[(self.turn + i) % len(tree.nodes)] for i in range(self.per_sample)]
        self.turn += self.per_sample
        parts = {"launcher": pss_mb(launcher),
                 **{name: pss_mb(pid) for name, pid in tree.helpers.items()}} if self.side else {}
        sizes = {pid: pss_mb(pid) for pid in picked}
        if not tree.all_alive() or None in parts.values():
            return  # a node left while we read: the others' shares grew, not their holdings
        self.samples += 1
        for pid, size in sizes.items():
            if size is not None:
                self.node_peak_mb[pid] = max(size, self.node_peak_mb.get(pid, 0.0))
        if not self.side:
            return
        side = sum(v for v in parts.values() if v is not None)
        if not side <= self.side_mb:  # also replaces the initial NaN
            self.side_mb = side
            self.parts_mb = {k: v for k, v in parts.items() if v is not None}

    @property
    def node_mb(self) -> float:
        return max(self.node_peak_mb.values(), default=float("nan"))


# --- one launch ---------------------------------------------------------------------------------

@dataclass
class Launched:
    """One run: when the command started (Unix time), its summary, its memory if sampled."""

    began: float
    summary: dict[str, Any]
    memory: Memory | None = None
    error: str = ""

    def since_command_s(self, key: str) -> float:
        """Command start to the summary's `key` (seconds from the collector opening)."""
        at = self.summary.get(key)
        if self.error or at is None:
            return float("nan")
        return float(self.summary["started_at"] + at - self.began)

    @property
    def to_first_exchange_s(self) -> float:
        """Command start to the last node done with its first round."""
        return self.since_command_s("first_round_seconds")

    @property
    def to_round_one_s(self) -> float:
        """Command start to the last node beginning round 1."""
        return self.since_command_s("first_round_start_seconds")

    @property
    def before_collector_s(self) -> float:
        """Command start to the collector opening: interpreter, imports, config, plan, data."""
        return float(self.summary["started_at"] - self.began) if not self.error else float("nan")


def run(options: list[str], run_dir: Path, memory: Memory | None = None) -> Launched:
    """dfl-launch with `options` to its end, sampling `memory` meanwhile if given."""
    err_path = run_dir.with_suffix(".stderr")  # a file: a pipe nobody reads can fill up
    began = time.time()
    code = watch(launch_command(options, run_dir), err_path, subprocess.DEVNULL, memory)
    summary_path = run_dir / "summary.json"
    if code != 0 or not summary_path.exists():
        lines = err_path.read_text(errors="replace").strip().splitlines()
        return Launched(began, {}, memory, " | ".join(lines[-4:]) or f"exit {code}")
    return Launched(began, json.loads(summary_path.read_text()), memory)


def watch(command: list[str], err_path: Path, out: int | IO[bytes],
          memory: Memory | None = None) -> int:
    """`command` from the repository root to its end (killed after RUN_TIMEOUT_S), its stderr
    to `err_path`, sampling `memory` meanwhile if given: its exit code."""
    began = time.time()
    with err_path.open("wb") as err:
        proc = subprocess.Popen(command, cwd=ROOT, env=WARM_ENV, stdout=out, stderr=err)
        while proc.poll() is None and time.time() - began < RUN_TIMEOUT_S:
            if memory is None:
                try:
                    proc.wait(RUN_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    break
            else:
                memory.sample(proc.pid)
                time.sleep(memory.every_s)
        if proc.poll() is None:
            proc.kill()
        return proc.wait()


def workload(topology: Path, model: str, rounds: int) -> list[str]:
    return ["--topology", str(topology), *WORKLOAD, "--set", f"model={MODELS[model]}",
            "--rounds", str(rounds), "--eval-every", str(rounds)]


def ring_file(nodes: int, workdir: Path) -> Path:
    path = workdir / f"ring{nodes}.yaml"
    if not path.exists():
        write_topology(ring(nodes), path)
    return path


WARM_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""The environment of every command timed here: bytecode is cached, as on a user's machine."""


def bare_mesh_start(plan: Path) -> float:
    """Wall seconds from starting `python -m bench.bare_mesh PLAN` (one round) to its last
    node past its first exchange (the nodes' Unix time, which the command prints)."""
    began = time.time()
    out = subprocess.run([sys.executable, "-m", "bench.bare_mesh", str(plan)], cwd=ROOT,
                         env=WARM_ENV, check=True, capture_output=True, text=True).stdout
    return float(json.loads(out)["first_exchange_at"]) - began


def bare_torch() -> float:
    """Wall seconds of a fresh `python -c "import torch"`, start to exit."""
    began = time.time()
    subprocess.run([sys.executable, "-c", "import torch"], env=WARM_ENV, check=True)
    return time.time() - began


# --- figures --------------------------------------------------------------------------------

def figures(quick: bool) -> list[Figure]:
    mode = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="dfl-bench-startup-") as tmp:
        work = Path(tmp)
        rings = {n: ring_file(n, work) for n in RATIO_GOALS}
        run(workload(rings[20], "mlp", 1), work / "warm-up")  # the data cache, the page cache
        launches: dict[int, list[Launched]] = {n: [] for n in rings}

        def timed(n: int) -> Callable[[], float]:
            def one() -> float:
                done = run(workload(rings[n], "mlp", mode.rounds),
                           work / f"ring{n}-{len(launches[n])}")
                launches[n].append(done)
                return done.to_first_exchange_s
            return one

        def bare(n: int) -> Callable[[], float]:
            plan = write_plan(work / f"bare{n}.json", yaml.safe_load(MODELS["mlp"]), rings[n], 1)
            return lambda: bare_mesh_start(plan)

        runs = {"torch": bare_torch}
        for n in rings:
            runs.update({f"bare{n}": bare(n), f"ring{n}": timed(n)})
        samples = interleaved(runs, mode.reps)
        fresh = fresh_torch(1)
        memory = {name: run(workload(rings[MEMORY_NODES], name, rounds),
                            work / f"memory-{name}", Memory(MEMORY_NODES))
                  for name, rounds in MEMORY_ROUNDS.items()}
    figs = [start_figure(n, launches[n], samples[f"ring{n}"], samples[f"bare{n}"],
                         samples["torch"], mode) for n in rings]
    for name, done in memory.items():
        figs += memory_figures(name, done, fresh.pss_mb)
    return figs


def start_figure(n: int, runs: list[Launched], seconds: list[float], bare_samples: list[float],
                 torch_samples: list[float], mode: Mode) -> Figure:
    ok = [r for r in runs if not r.error]
    extra: dict[str, float | str] = {
        "samples_s": ", ".join(f"{s:.2f}" for s in seconds),
        "bare_mesh_samples_s": ", ".join(f"{s:.2f}" for s in bare_samples),
        "torch_import_s": median(torch_samples),
        "torch_samples_s": ", ".join(f"{s:.2f}" for s in torch_samples),
        **{f"error {i}": r.error for i, r in enumerate(runs) if r.error}}
    if ok:
        extra.update({
            "command_to_collector_s": median([r.before_collector_s for r in ok]),
            "collector_to_all_ready_s": median([r.summary["startup_seconds"] for r in ok]),
            "all_ready_to_round_one_s": median([r.summary["first_round_start_seconds"]
                                                - r.summary["startup_seconds"] for r in ok]),
            "command_to_round_one_s": median([r.to_round_one_s for r in ok]),
            "round_one_s": median([r.summary["first_round_seconds"]
                                   - r.summary["first_round_start_seconds"] for r in ok])})
    valid = [s for s in seconds if s == s]
    return compare(GROUP, f"ring{n} MLP: command to every node past its first exchange",
                   median(valid) if valid else float("nan"), "s",
                   "bare mesh's start (bench/bare_mesh.py, 1 round)", median(bare_samples),
                   goal_max=RATIO_GOALS[n], reps=len(seconds),
                   note=f"{mode.note}; {machine()}", extra=extra)


def model_bytes(name: str) -> tuple[int, int]:
    """(parameter bytes, optimizer bytes) of the model on Fashion-MNIST; d-psgd's optimizer is
    plain SGD, whose only state is the gradient (one buffer the size of the parameters)."""
    import yaml

    from dfl_node.learning.models import build_model

    model = build_model(yaml.safe_load(MODELS[name]), (1, 28, 28), 10, seed=0)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    return params, sum(p.numel() * p.element_size() for p in model.parameters()
                       if p.requires_grad)


def memory_figures(name: str, done: Launched, torch_mb: float) -> list[Figure]:
    memory = done.memory
    assert memory is not None
    params, optimizer = model_bytes(name)
    node_goal = NODE_BASE_MB + NODE_MODEL_COPIES * (params + optimizer) / 1e6
    note = (f"ring{MEMORY_NODES}, {MEMORY_ROUNDS[name]} rounds, {memory.samples} samples while "
            f"every node ran; {machine()}" + (f"; run failed: {done.error}" if done.error else ""))
    peaks = list(memory.node_peak_mb.values())
    node_extra: dict[str, float | str] = {
        "param_MB": params / 1e6, "optimizer_MB": optimizer / 1e6,
        "nodes_read": len(peaks),
        "node_mean_peak_MB": sum(peaks) / len(peaks) if peaks else float("nan"),
        "bare_torch_interpreter_MB": torch_mb}
    side_extra: dict[str, float | str] = {
        **{f"{k}_MB": v for k, v in memory.parts_mb.items()},
        "bare_torch_interpreter_MB": torch_mb}
    return [
        compare(GROUP, f"{name}: PSS per node (largest, in the rounds)", memory.node_mb, "MB",
                f"{NODE_BASE_MB:g} MB + {NODE_MODEL_COPIES} x (param + optimizer bytes)",
                node_goal, goal_max=1.0, note=note, extra=node_extra),
        compare(GROUP, f"{name}: PSS of launcher + forkserver (+ helpers)",
                memory.side_mb, "MB", "goal", LAUNCHER_GOAL_MB, goal_max=1.0, note=note,
                extra=side_extra),
    ]


def machine() -> str:
    return f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"


def main() -> None:
    module_main(figures, __doc__, "7 repetitions")


if __name__ == "__main__":
    main()
