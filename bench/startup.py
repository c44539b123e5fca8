"""Start-up cost of a mesh: launcher start to first round, per-node memory, round rate.

`python -m bench.startup [--nodes 20,100] [--rounds 20]` launches d-psgd rings with the
protocol's defaults (real Fashion-MNIST, the default CNN) and measures, from outside:
- seconds from the first node's spawn to every node being ready (data, model, sockets, start
  barrier), and from `dfl-launch` starting to every node having finished round 1;
- each node's PSS (proportional set size, shared pages split among sharers) mid-run, beside a
  fresh `python -c "import torch"` process measured in the same run (the ratio is the figure:
  absolute sizes depend on the machine);
- rounds per second of the 20-node ring once it runs;
- the same number of fresh torch-importing interpreters started at once, as the reference for
  start-up time.
Results are printed as a table and written as JSON (`--json FILE`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from topologies.generators import ring
from topologies.writer import write_topology

ROOT = Path(__file__).resolve().parents[1]


def pss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def node_pids(run_dir: Path) -> list[int]:
    pids = []
    for log in (run_dir / "logs").glob("node-*.log"):
        words = log.read_text().split("\n", 1)[0].split()
        if len(words) >= 4 and words[2] == "pid":
            pids.append(int(words[3]))
    return pids


def rounds_done(run_dir: Path, nodes: int) -> dict[int, int]:
    """round -> how many nodes reported it so far."""
    path = run_dir / "metrics.jsonl"
    counts: dict[int, int] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)["round"]
            counts[r] = counts.get(r, 0) + 1
    return {r: c for r, c in counts.items() if c == nodes}


def run_mesh(nodes: int, rounds: int, workdir: Path) -> dict[str, float]:
    topo = workdir / f"ring{nodes}.yaml"
    write_topology(ring(nodes), topo)
    run_dir = workdir / f"run{nodes}"
    cmd = [sys.executable, "-m", "launcher.cli", "--topology", str(topo), "--protocol",
           "d-psgd", "--rounds", str(rounds), "--eval-every", "1", "--out", str(run_dir)]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    round_at: dict[int, float] = {}
    pss: list[float] = []
    while proc.poll() is None:
        for r in rounds_done(run_dir, nodes):
            round_at.setdefault(r, time.monotonic() - started)
        if round_at and not pss:
            pss = [m for m in map(pss_mb, node_pids(run_dir)) if m is not None]
        time.sleep(0.05)
    if proc.returncode != 0:
        raise SystemExit(f"bench: the {nodes}-node run failed: {proc.stderr.read().decode()}")
    for r in rounds_done(run_dir, nodes):
        round_at.setdefault(r, time.monotonic() - started)
    first, last = round_at[1], round_at[max(round_at)]
    rate = (max(round_at) - 1) / (last - first) if last > first else float("nan")
    ready = json.loads((run_dir / "summary.json").read_text())["startup_seconds"]
    return {"nodes": nodes, "ready_s": ready, "first_round_s": first, "rounds_per_s": rate,
            "pss_mean_mb": statistics.mean(pss), "pss_max_mb": max(pss)}


def fresh_torch(count: int) -> dict[str, float]:
    """`count` fresh interpreters importing torch at once: time until all are up, and PSS."""
    code = "import sys, torch; print('up', flush=True); sys.stdin.read()"
    started = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env={**os.environ, "OMP_NUM_THREADS": "1"})
             for _ in range(count)]
    for p in procs:
        p.stdout.readline()
    elapsed = time.monotonic() - started
    pss = [m for m in (pss_mb(p.pid) for p in procs) if m is not None]
    for p in procs:
        p.stdin.close()
        p.wait()
    return {"count": count, "all_up_s": elapsed, "pss_mean_mb": statistics.mean(pss)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="20,100")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    with tempfile.TemporaryDirectory(prefix="dfl-bench-") as tmp:
        meshes = [run_mesh(n, args.rounds, Path(tmp)) for n in sizes]
    reference = fresh_torch(min(sizes))
    print(f"machine: {os.cpu_count()} cores, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB")
    print(f"reference: {reference['count']} fresh torch interpreters up in "
          f"{reference['all_up_s']:.1f} s, PSS {reference['pss_mean_mb']:.0f} MB each")
    print(f"{'nodes':>6} {'all ready s':>12} {'first round s':>14} {'vs fresh':>9} {'PSS MB':>8} "
          f"{'PSS ratio':>10} {'rounds/s':>9}")
    for m in meshes:
        vs_fresh = m["first_round_s"] / reference["all_up_s"] if m["nodes"] == reference[
            "count"] else float("nan")
        print(f"{m['nodes']:>6} {m['ready_s']:>12.1f} {m['first_round_s']:>14.1f} {vs_fresh:>9.2f} "
              f"{m['pss_mean_mb']:>8.0f} {m['pss_mean_mb'] / reference['pss_mean_mb']:>10.2f} "
              f"{m['rounds_per_s']:>9.2f}")
    if args.json:
        args.json.write_text(json.dumps({"meshes": meshes, "reference": reference}, indent=1))


if __name__ == "__main__":
    main()
