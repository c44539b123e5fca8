"""Reproduce SSD-FL's comparison (Sec. VI-D/E, Figs 4-7): ssd-fl against sdfl, pdfl, stc, cstc.

    python -m bench.reproduce_ssdfl [--cycles 10] [--local-steps 2] [--eval-size 500]
                                    [--seeds 1-2] [--graphs er10,er30,ba30,rgeo30,ws30,k30]
                                    [--levels mild,extreme] [--only ssd-fl,sdfl,...] [--out DIR]

Fashion-MNIST, label slots with 3 labels per device (mild) or 1 (extreme), heterogeneous
optimizers (Sec. VI-A), tau_a = 3, tau_r = 1 for every method (the paper's defaults for the
network-size and architecture sweeps), the same init, batches and optimizer draw per seed for all
methods (docs/protocols/ssd-fl.md#e9). Graphs (generated once, seed 0, bridge-repaired (#e6),
written to
OUT/topologies): ER(10, 0.1), ER(30, 0.1), BA(30, 1), RGeo(30, 0.2), WS(30, 3, 0.2) (a ring, E5),
K_30. The budget is cut to fit about an hour on two CPU cores: `--cycles` global cycles instead
of 20, `--local-steps` mini-batch steps per iteration instead of an epoch (#e1), the global
test subset of `--eval-size` images, the `--model` (the paper's 5-layer CNN is `ssdfl-cnn`),
and two seeds. Every run is a real mesh (one process per device) with per-cycle metrics, all of
them one sweep (docs/sweeps.md: a variant per method and level, a topology per graph, run
directories OUT/<method>-<level>/<graph>/defaults/seed-<s>); a finished run is skipped and an
interrupted one resumed when the script runs again, and OUT/report.md holds dfl-report's tables.

Prints markdown tables: final mean accuracy per method and graph (mean +- 95% t-interval over
seeds), cycles to the paper's FMNIST thresholds, S* per graph beside what the paper says, and
for each of the paper's claims covered whether it holds at this budget.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import sweeps
from bench.seedstats import mean_ci, separated
from launcher.sweep.spec import SweepSpec, Variant
from topologies import generators as gen
from topologies.model import Topology
from topologies.writer import write_topology

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("ssd-fl", "sdfl", "pdfl", "stc", "cstc")
LEVELS = {"mild": ("shards:3", (0.65, 0.72)), "extreme": ("shards:1", (0.40, 0.45))}


@dataclass(frozen=True)
class Graph:
    label: str
    make: Callable[[], Topology]
    paper: str  # what the paper reports for this graph (its Sec. VI), FMNIST


GRAPHS = (
    Graph("er10", lambda: gen.erdos_renyi(10, 0.1, seed=0),
          "N=10 mild: cSTC ~ SSD-FL ~ 74.5% (Fig 4)"),
    Graph("er30", lambda: gen.erdos_renyi(30, 0.1, seed=0),
          "mild 81.1 vs STC 78.2; extreme 52.5 vs STC 50.6 (Fig 6)"),
    Graph("ba30", lambda: gen.barabasi_albert(30, 1, seed=0),
          "mild 73.5 vs STC 67.7; extreme 44.8 vs STC 37.6 (Fig 6)"),
    Graph("rgeo30", lambda: gen.random_geometric(30, 0.2, seed=0),
          "SSD-FL ahead (no numbers)"),
    Graph("ws30", lambda: gen.watts_strogatz(30, 3, 0.2, seed=0),
          "SSD-FL ahead, among the largest gains (no numbers)"),
    Graph("k30", lambda: gen.complete(30),
          "S* = 1; mild 88.3 vs sDFL 88.2; extreme 80.9 vs sDFL 81.0 (tie)"),
)


def topology_file(out: Path, graph: Graph) -> Path:
    path = out / "topologies" / f"{graph.label}.yaml"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_topology(replace(graph.make(), name=graph.label), path,
                       header=f"reproduce_ssdfl graph {graph.label}")
    return path


def variant(method: str, level: str) -> Variant:
    """A method at one heterogeneity level: its label slots and that level's thresholds."""
    partition, thresholds = LEVELS[level]
    return Variant(name=f"{method}-{level}", protocol=method, settings={
        "partition": partition,
        "cycle_metrics": {"params_every": 1, "thresholds": list(thresholds)}})


def sweep_spec(opts: argparse.Namespace) -> SweepSpec:
    """The comparison as one sweep: a variant per method and level, a topology per graph; run
    directories OUT/<method>-<level>/<graph>/defaults/seed-<s>."""
    return SweepSpec(
        out=opts.out, variants=[variant(m, level) for m in opts.methods for level in opts.levels],
        topologies=[str(topology_file(opts.out, g)) for g in opts.graphs], seeds=opts.seeds,
        settings={"dataset": "fmnist", "rounds": opts.cycles, "eval_size": opts.eval_size,
                  "model": {"name": opts.model}, "local_steps": opts.local_steps, "tau_a": 3,
                  "tau_r": 1, "data_root": str(opts.data_root) if opts.data_root else None})


def s_star(summary: dict[str, Any]) -> int | None:
    path = Path(summary["_dir"]) / "prephase.json"
    return json.loads(path.read_text())["s_star"] if path.exists() else None


def fmt(value: tuple[float, float], scale: float = 100.0) -> str:
    mean, half = value
    if mean != mean:
        return "-"
    return f"{mean * scale:.1f}" + ("" if half != half else f" ± {half * scale:.1f}")


def cycles_cell(summaries: list[dict[str, Any]], threshold: float) -> str:
    """Mean cycles over seeds that reach it; '-' if none does, 'k (n/R)' if only some do."""
    hits = [s["cycles_to_threshold"].get(f"{threshold:g}") for s in summaries]
    reached = [h for h in hits if h is not None]
    if not reached:
        return "-"
    text = f"{sum(reached) / len(reached):.1f}"
    return text if len(reached) == len(hits) else f"{text} ({len(reached)}/{len(hits)})"


def claims(level: str, graph: str, results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The paper's claims for one graph: SSD-FL's final accuracy >= every baseline's (Figs
    4-7), and fewer cycles to the thresholds (Tables I-II, measured at tau_a 3, tau_r 1)."""
    acc = {m: mean_ci([s["avg_accuracy"] for s in results[m]]) for m in results}
    if "ssd-fl" not in acc:
        return []
    lines = []
    for m in (x for x in METHODS[1:] if x in acc):
        ahead = acc["ssd-fl"][0] >= acc[m][0]
        sep = separated(acc["ssd-fl"], acc[m])
        verdict = ("holds" if ahead else "fails") + (" (separated)" if sep else
                                                     " (within the seeds' spread)")
        lines.append(f"{graph}/{level}: SSD-FL {fmt(acc['ssd-fl'])} >= {m} {fmt(acc[m])}: "
                     f"{verdict}")
    return lines


def print_tables(results: dict[tuple[str, str, str], list[dict[str, Any]]],
                 opts: argparse.Namespace) -> list[str]:
    verdicts = []
    for level in opts.levels:
        graphs = [g for g in opts.graphs if (g.label, level, opts.methods[0]) in results]
        print(f"\n### Final mean accuracy (%), FMNIST {level}, after {opts.cycles} cycles\n")
        print("| method | " + " | ".join(g.label for g in graphs) + " |")
        print("|---" * (len(graphs) + 1) + "|")
        for m in opts.methods:
            cells = [fmt(mean_ci([s["avg_accuracy"] for s in results[(g.label, level, m)]]))
                     for g in graphs]
            print(f"| {m} | " + " | ".join(cells) + " |")
        print(f"| paper (FMNIST {level}) | " + " | ".join(g.paper for g in graphs) + " |")
        for t in LEVELS[level][1]:
            print(f"\n### Cycles to {t:.0%} mean accuracy, FMNIST {level} "
                  "(mean over seeds that reach it; '-' none)\n")
            print("| method | " + " | ".join(g.label for g in graphs) + " |")
            print("|---" * (len(graphs) + 1) + "|")
            for m in opts.methods:
                cells = [cycles_cell(results[(g.label, level, m)], t) for g in graphs]
                print(f"| {m} | " + " | ".join(cells) + " |")
        for g in graphs:
            verdicts += claims(level, g.label,
                               {m: results[(g.label, level, m)] for m in opts.methods})
    if "ssd-fl" in opts.methods:
        print("\n### S* per graph (literal Algorithm 1; seeds listed), beside the paper\n")
        print("| graph | level | S* per seed | paper |")
        print("|---|---|---|---|")
        for (graph, level, m), summaries in sorted(results.items()):
            if m == "ssd-fl":
                paper = next(g.paper for g in GRAPHS if g.label == graph)
                stars = [s_star(s) for s in summaries]
                print(f"| {graph} | {level} | {stars} | "
                      f"{'S* = 1' if graph == 'k30' else 'not given'}; {paper} |")
    return verdicts


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.reproduce_ssdfl",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--local-steps", type=int, default=2)
    ap.add_argument("--eval-size", type=int, default=500)
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--seeds", type=sweeps.seed_range, default=[1, 2],
                    help="A-B (default 1-2)")
    ap.add_argument("--graphs", default=",".join(g.label for g in GRAPHS))
    ap.add_argument("--levels", default="mild,extreme")
    ap.add_argument("--only", default=",".join(METHODS), help="comma-separated methods")
    ap.add_argument("--data-root", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "reproduce-ssdfl")
    opts = ap.parse_args(argv)
    known = {g.label: g for g in GRAPHS}
    bad = [x for x in opts.graphs.split(",") if x not in known] + \
        [x for x in opts.levels.split(",") if x not in LEVELS] + \
        [x for x in opts.only.split(",") if x not in METHODS]
    if bad or min(opts.cycles, opts.local_steps, opts.eval_size) < 1:
        ap.error(f"unknown or bad values {bad or 'cycles/local-steps/eval-size < 1'}")
    opts.graphs = [known[x] for x in opts.graphs.split(",")]
    opts.levels = opts.levels.split(",")
    opts.methods = [m for m in METHODS if m in opts.only.split(",")]
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    runs = len(opts.graphs) * len(opts.levels) * len(opts.methods) * len(opts.seeds)
    print(f"SSD-FL reproduction (FMNIST, tau_a 3, tau_r 1, heterogeneous optimizers); budget: "
          f"{opts.cycles} cycles (paper: 20) x {opts.local_steps} local steps per iteration "
          f"(paper: unstated, default: an epoch), model {opts.model}, global eval subset "
          f"{opts.eval_size}, seeds {opts.seeds}; {runs} runs over graphs "
          f"{[g.label for g in opts.graphs]}, levels {opts.levels}, methods {opts.methods}; "
          "accuracies are the mean over devices, mean ± 95% t-interval over seeds")
    sys.stdout.flush()
    done = sweeps.summaries(sweeps.run(sweep_spec(opts), "reproduce_ssdfl"))
    results = {(g.label, level, m): [done[(f"{m}-{level}", g.label, seed)]
                                     for seed in opts.seeds]
               for g in opts.graphs for level in opts.levels for m in opts.methods}
    verdicts = print_tables(results, opts)
    print("\nThe paper's claims at this budget:")
    for line in verdicts:
        print(f"  - {line}")
    table = {"/".join(k): [{key: s.get(key) for key in ("avg_accuracy", "worst_accuracy",
                                                         "cycles_to_threshold",
                                                         "avg_model_accuracy", "consensus_gap")}
                           for s in v] for k, v in results.items()}
    (opts.out / "table.json").write_text(json.dumps({"cycles": opts.cycles,
                                                     "seeds": opts.seeds, "runs": table},
                                                    indent=1) + "\n")
    print(f"\ntable: {opts.out / 'table.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
