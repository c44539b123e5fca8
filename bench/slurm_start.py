"""A mesh as a Slurm job against the same mesh started locally: from the command to every node
in round 1, side by side in one run.

`python -m bench.slurm_start [--full]` starts the test suite's Slurm lab (tests/slurm_lab.py: a
real slurmctld and two slurmd hosts, each in its own network namespace, on this machine; it
needs root and Debian's `slurm-wlm` and `munge`), then times, interleaved, the start-up
workload of bench/startup.py (d-psgd, IID Fashion-MNIST, the MLP, one step per round) on a ring
of 50:

- local: `dfl-launch --topology ring50 ...`, every node a child of the launcher;
- Slurm: `dfl-launch slurm --submit ...` on the lab's login host, its 50 tasks spread over the
  two slurmd hosts by Slurm (one job step of all), each node finding its neighbours through
  the directory.

Each time runs from the instant this script starts the command to the last node beginning its
first round (the run's own record: `summary.json` `started_at` plus
`first_round_start_seconds`). The goal: Slurm within 1.5x of local. The hosts of the lab share
this machine's cores with each other, as the local run's nodes do, so the ratio is Slurm's own
cost: sbatch, the scheduler, the nodes' step, a server per host, discovery.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.figures import Figure, Mode, compare, interleaved, median, module_main, not_measured
from bench.launch import ROOT
from bench.startup import Launched, machine, ring_file, run, workload
from tests import slurm_lab  # the test suite's lab: a real Slurm on this machine

GROUP = "slurm_start"
NODES = 50
GOAL = 1.5  # (Slurm job: command to round 1) / (local: command to round 1)
HOSTS = 2
RUN_TIMEOUT_S = 900.0

QUICK = Mode(reps=2, rounds=2, note="quick: 2 interleaved repetitions, 2-round runs")
FULL = Mode(reps=5, rounds=2, note="full: 5 interleaved repetitions, 2-round runs")


def submitted(lab: slurm_lab.Cluster, options: list[str], run_dir: Path) -> Launched:
    """`dfl-launch slurm --submit` with `options` on the lab's login host, to its end."""
    log = run_dir.with_suffix(".log")
    began = time.time()
    proc = lab.start([sys.executable, "-m", "launcher.cli", "slurm", *options, "--quiet",
                      "--no-plots", "--submit", "-o", str(run_dir)], log, cwd=ROOT)
    try:
        proc.wait(RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)  # cancels the job
        proc.wait()
    summary_path = run_dir / "summary.json"
    if proc.returncode != 0 or not summary_path.exists():
        lines = log.read_text(errors="replace").strip().splitlines()
        return Launched(began, {}, None, " | ".join(lines[-4:]) or f"exit {proc.returncode}")
    return Launched(began, json.loads(summary_path.read_text()))


def hosts_used(done: Launched) -> str:
    counts: dict[str, int] = {}
    for node in done.summary.get("nodes", []):
        counts[node.get("host", "?")] = counts.get(node.get("host", "?"), 0) + 1
    return ", ".join(f"{host}: {n}" for host, n in sorted(counts.items()))


def phases(runs: list[Launched]) -> dict[str, list[float]]:
    """Where the time went: the command to its collector listening (the launcher's imports and
    plan; for Slurm, sbatch follows), the collector to every node ready (for Slurm: scheduling,
    the host servers' warm-up, the steps, discovery), and on to round 1."""
    if not runs:
        return {}
    return {"command_to_collector": [r.before_collector_s for r in runs],
            "collector_to_all_ready": [float(r.summary["startup_seconds"]) for r in runs],
            "all_ready_to_round_one": [float(r.summary["first_round_start_seconds"]
                                             - r.summary["startup_seconds"]) for r in runs]}


def figures(quick: bool) -> list[Figure]:
    reason = slurm_lab.unavailable()
    if reason is not None:
        return [not_measured(GROUP, "skipped", f"no Slurm lab here: {reason}")]
    mode = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="dfl-bench-slurm-") as tmp, \
            slurm_lab.cluster(nodes=HOSTS, cpus=NODES // HOSTS) as lab:
        work = Path(tmp)
        ring = ring_file(NODES, work)
        options = workload(ring, "mlp", mode.rounds)
        run(options, work / "warm-up")  # the data cache, the page cache
        runs: dict[str, list[Launched]] = {"local": [], "slurm": []}

        def timed(kind: str) -> Callable[[], float]:
            def one() -> float:
                name = f"{kind}-{len(runs[kind])}"
                done = (run(options, work / name) if kind == "local"
                        else submitted(lab, options, work / name))
                runs[kind].append(done)
                return done.to_round_one_s
            return one

        samples = interleaved({kind: timed(kind) for kind in runs}, mode.reps)
    local_s, slurm_s = median(samples["local"]), median(samples["slurm"])
    errors = {f"error {kind} {i}": r.error for kind, rs in runs.items()
              for i, r in enumerate(rs) if r.error}
    extra: dict[str, float | str] = {
        "local_samples_s": ", ".join(f"{s:.2f}" for s in samples["local"]),
        "slurm_samples_s": ", ".join(f"{s:.2f}" for s in samples["slurm"]),
        "slurm_hosts": "; ".join(hosts_used(r) for r in runs["slurm"] if not r.error),
        **{f"{kind}_{part}_s": median(values) for kind, rs in runs.items()
           for part, values in phases([r for r in rs if not r.error]).items()},
        **errors}
    return [compare(GROUP, f"ring{NODES} as a Slurm job: command to every node in round 1",
                    slurm_s, "s", f"the same mesh by dfl-launch locally ({local_s:.1f} s)",
                    local_s, goal_max=GOAL, reps=len(samples["slurm"]),
                    note=f"{mode.note}; {HOSTS} slurmd hosts; {machine()}", extra=extra)]


def main() -> None:
    module_main(figures, __doc__, "5 repetitions")


if __name__ == "__main__":
    main()
