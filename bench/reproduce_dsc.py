"""Reproduce DSC's Table 2 and its J sweep on procedural multi-task scenes.

    python -m bench.reproduce_dsc [--rounds 20] [--epochs 2] [--seeds 0-1]
                                  [--sweep 1,2,3,5,8,12,15]
                                  [--tau 0.1] [--topology rgg10] [--out DIR] [--tiny]

Every method runs as a real mesh (`dfl-launch`, one process per client, TDMA frames) on the
mini setting (docs/protocols/dsc.md#mini-run): rgg10 (RGG, radius grown to connectivity), NYU-like
portfolios (2x{seg,sn,dep}, 2x{seg,sn}, 3x{seg,dep}, 3x{sn,dep}), SynthScenes 32x32 with Dirichlet
(1) quantity skew and per-node scene priors, the routed mini ResNet (K = 8), E local epochs per
round. Table 2: no aggregation, FedAvg (column-uniform), heuristic max, FedAMP and the proposed
similarity weights at J = 1 and J = 5; then the J sweep of the proposed method, with J* fitted
from it (protocols/dsc/depth.py: err = -Delta_all, rho = the runs' mean rho(W)) beside the
measured best J. Delta (Eq. 42-44) is against the same seed's no-aggregation run (the runs'
`hyper.delta_baseline`). The runs are sweeps (docs/sweeps.md): the no-aggregation runs first,
then, since the baseline is a setting that differs by seed, one sweep per seed of the rest, a
variant per method and depth; run directories are OUT/<protocol>-J<depth>/<topology>/defaults/
seed-<s> (OUT/dsc-noagg/... for the baseline). A finished run is skipped and an interrupted one
resumed when the script runs again, and OUT/report.md holds dfl-report's tables. `--tiny` is the
smoke budget (16x16 scenes, small pools).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench import sweeps
from bench.seedstats import mean_ci, separated
from launcher.config.layers import defaults_file
from launcher.sweep.spec import SweepSpec, Variant
from protocols.dsc.depth import continuous_depth, deployed_depth, fit_constants
from protocols.dsc.task_metrics import delta_report

ROOT = Path(__file__).resolve().parents[1]
TINY_SCENES = {"size": 16, "train_size": 200, "test_size": 40, "min_size": 12}
# The test pool of the paper's size (NYU-v2's 654 images), as protocols/configs/dsc-paper.yaml
# declares it; the first-run default is smaller.
PAPER_SCENES = yaml.safe_load(defaults_file("dsc").with_name("dsc-paper.yaml").read_text())[
    "scenes"]
NOAGG = "dsc-noagg"
REFERENCE = "No aggregation"
CPU_FIXED_S, CPU_EPOCH_S = 25.0, 3.0  # see estimate_minutes


@dataclass(frozen=True)
class Method:
    label: str
    protocol: str


METHODS = (Method("FedAvg", "dsc-fedavg"), Method("max", "dsc-max"),
           Method("FedAMP", "dsc-fedamp"), Method("Similarity", "dsc"))
PROPOSED = METHODS[-1]
TABLE_DEPTHS = (1, 5)
PAPER_ORDER = ("Similarity", "FedAMP", "max", "FedAvg")  # Table 2's Delta_all, J = 1 and J = 5
# Table 2's columns: (task, metric) in the paper's order, then the task's Delta.
COLUMNS = {"seg": ("miou", "pacc"), "sn": ("mean", "median", "a11", "a22", "a30"),
           "dep": ("abs", "rel", "d1", "d2", "d3")}


def variant(protocol: str, depth: int) -> Variant:
    return Variant(name=f"{protocol}-J{depth}", protocol=protocol,
                   settings={"hyper.depth": depth})


def sweep_spec(opts: argparse.Namespace, variants: list[Variant], seeds: list[int],
               baseline: Path | None = None) -> SweepSpec:
    """These variants on the command line's budget, Delta against `baseline` when given."""
    settings = {"rounds": opts.rounds, "eval_every": opts.rounds, "hyper.epochs": opts.epochs,
                "hyper.tau": opts.tau,
                "scenes": TINY_SCENES if opts.tiny else PAPER_SCENES,
                "hyper.delta_baseline": str(baseline) if baseline else None}
    return SweepSpec(out=opts.out, variants=variants, topologies=[opts.topology], seeds=seeds,
                     settings={k: v for k, v in settings.items() if v is not None})


def run_all(opts: argparse.Namespace) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Every run's summary by (variant, topology, seed): the no-aggregation sweep, then each
    seed's sweep of the methods at the table's depths and the J sweep's other depths."""
    reference = Variant(name=NOAGG, protocol=NOAGG, settings={"hyper.depth": 1})
    noagg = sweeps.run(sweep_spec(opts, [reference], opts.seeds), "reproduce_dsc")
    done = sweeps.summaries(noagg)
    depths = [*TABLE_DEPTHS, *(j for j in opts.sweep if j not in TABLE_DEPTHS)]
    variants = [variant(m.protocol, j) for j in TABLE_DEPTHS for m in METHODS] + \
        [variant(PROPOSED.protocol, j) for j in depths[len(TABLE_DEPTHS):]]
    for point in noagg.points:
        spec = sweep_spec(opts, variants, [point.seed], baseline=point.run_dir)
        done |= sweeps.summaries(sweeps.run(spec, f"reproduce_dsc (seed {point.seed})"))
    return done


def client_average(summary: dict[str, Any], task: str, metric: str) -> float:
    rows = [m[task][metric] for m in summary["task_metrics"].values() if task in m]
    return sum(rows) / len(rows)


def table_row(summaries: list[dict[str, Any]]) -> str:
    """One Table 2 row: client-averaged metrics (mean over seeds), Delta_t and Delta_all."""
    cells = []
    for task, metrics in COLUMNS.items():
        for q in metrics:
            values = [client_average(s, task, q) for s in summaries]
            cells.append(f"{sum(values) / len(values):10.3f}")
        deltas = [s.get("delta_tasks", {}).get(task) for s in summaries]
        cells.append(f"{mean_ci([d for d in deltas if d is not None])[0]:10.2f}"
                     if all(d is not None for d in deltas) else f"{'-':>10}")
    mean, half = mean_ci([float(s.get("delta_all") or 0.0) for s in summaries])
    return "".join(cells) + f"  {mean:7.2f} +- {half:5.2f}"


def print_table(rows: dict[str, list[dict[str, Any]]]) -> None:
    heads = [f"{t}.{q}" for t, qs in COLUMNS.items() for q in (*qs, "D")]
    print("\nTable 2 layout (client averages; D = Delta in %, mean over seeds)")
    print(f"{'Method':<18}" + "".join(f"{h:>10}" for h in heads) + "   Delta_all +- 95%")
    for label, summaries in rows.items():
        print(f"{label:<18}{table_row(summaries)}")


def group_deltas(summary: dict[str, Any], noagg: dict[str, Any]) -> dict[str, float]:
    """Fig. 6/7: per portfolio group, the mean over its clients of mean_t Delta_{i,t} minus the
    same client's Delta in the no-aggregation run: (m_i - m_i^noagg) / b, what aggregation
    changed for that client (against the client average alone a group's curve would mostly
    show who holds more data)."""
    base = {int(n): m for n, m in noagg["task_metrics"].items()}
    ours = delta_report({int(n): m for n, m in summary["task_metrics"].items()}, base)
    ref = delta_report(base, base)
    groups: dict[str, list[float]] = {}
    for node, deltas in ours.per_client.items():
        name = "+".join(summary["portfolios"][str(node)])
        diff = [d - ref.per_client[node][t] for t, d in deltas.items()]
        groups.setdefault(name, []).append(sum(diff) / len(diff))
    return {g: sum(v) / len(v) for g, v in sorted(groups.items())}


def sweep_report(sweep: dict[int, list[dict[str, Any]]],
                 noagg: list[dict[str, Any]]) -> dict[str, Any]:
    """The J sweep's table, the fitted J* and the measured best J (runs in seed order)."""
    groups = sorted({"+".join(t) for t in noagg[0]["portfolios"].values()})
    print("\nJ sweep of the proposed method (Delta_all %; per portfolio group: mean change of "
          "the clients' Delta against their own no-aggregation run, %; rho(W))")
    print(f"{'J':>3}  {'Delta_all +- 95%':>17}" + "".join(f"{g:>14}" for g in groups)
          + f"{'rho':>9}{'vsec/round':>12}")
    means: dict[int, tuple[float, float]] = {}
    for j, runs in sorted(sweep.items()):
        means[j] = mean_ci([float(s["delta_all"]) for s in runs])
        per_seed = [group_deltas(s, base) for s, base in zip(runs, noagg, strict=True)]
        per_group = [mean_ci([d[g] for d in per_seed])[0] for g in groups]
        rho = sum(s["rho_mean"] for s in runs) / len(runs)
        vsec = sum(s["virtual_seconds"] / s["rounds"] for s in runs) / len(runs)
        print(f"{j:>3}  {means[j][0]:8.2f} +- {means[j][1]:5.2f}"
              + "".join(f"{v:14.2f}" for v in per_group) + f"{rho:9.4f}{vsec:12.3f}")
    best = max(means, key=lambda j: means[j][0])
    rho = sum(s["rho_mean"] for runs in sweep.values() for s in runs) / sum(map(len,
                                                                                sweep.values()))
    out: dict[str, Any] = {"measured_best_j": best, "rho": rho,
                           "delta_all": {str(j): list(v) for j, v in means.items()}}
    if len(means) >= 3 and 0 < rho < 1:
        fit = fit_constants(list(means), [-means[j][0] for j in means], rho)
        star = continuous_depth(fit.a, fit.ab, rho)
        out |= {"fit": vars(fit), "j_star": star, "j_deployed": deployed_depth(
            fit.a, fit.ab, rho, max(means))}
        print(f"fitted: A = {fit.a:.4g}, alpha B = {fit.ab:.4g}, c0 = {fit.c0:.4g} "
              f"(rms {fit.residual:.3g}); J* = {star:.3f} -> deployed J = {out['j_deployed']}"
              f"; measured best J = {best}")
    ends = (min(means), max(means))
    interior = best not in ends
    sep = interior and all(separated(means[best], means[e]) for e in ends)
    out["u_shape"] = interior
    print(f"U-shape in J (interior best, paper: peak at J = 5): "
          f"{'yes' if interior else 'no'}{' (intervals separated)' if sep else ''}")
    return out


def orderings(rows: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = []
    for j in TABLE_DEPTHS:
        means = {m: mean_ci([float(s["delta_all"]) for s in rows[f"{m} (J={j})"]])
                 for m in PAPER_ORDER}
        ranked = sorted(means, key=lambda m: -means[m][0])
        ok = tuple(ranked) == PAPER_ORDER
        sep = ok and all(separated(means[a], means[b])
                         for a, b in itertools.pairwise(PAPER_ORDER))
        lines.append(f"J={j}: paper {' > '.join(PAPER_ORDER)}; here {' > '.join(ranked)} -> "
                     f"{'holds' if ok else 'does NOT hold'}"
                     f"{' (intervals separated)' if sep else ''}")
    for m in PAPER_ORDER:
        deep = mean_ci([float(s["delta_all"]) for s in rows[f"{m} (J=5)"]])
        shallow = mean_ci([float(s["delta_all"]) for s in rows[f"{m} (J=1)"]])
        lines.append(f"{m}: J=5 above J=1 (paper: every method) -> "
                     f"{'holds' if deep[0] > shallow[0] else 'does NOT hold'}"
                     f" ({shallow[0]:.2f} -> {deep[0]:.2f})")
    return lines


def estimate_minutes(opts: argparse.Namespace, runs: int) -> float:
    """Measured (inproc CPU time, 10 nodes, 32x32): about CPU_FIXED_S per run (start, scene
    rendering, evaluation) plus CPU_EPOCH_S per local epoch of a round; two cores."""
    cpu = runs * (CPU_FIXED_S + CPU_EPOCH_S * opts.rounds * opts.epochs)
    return cpu / 2 / 60


def depth_list(text: str) -> list[int]:
    """`1,2,3,5,8,12,15` or `1-15` (or both, `1-3,5,8`): the J sweep's depths, sorted."""
    out: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if match is None or int(match[1]) < 1:
            raise argparse.ArgumentTypeError(f"expected depths >= 1 like 1,2,5 or 1-15, "
                                             f"got {text!r}")
        out.extend(range(int(match[1]), int(match[2] or match[1]) + 1))
    return sorted(set(out))


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.reproduce_dsc",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seeds", type=sweeps.seed_range, default=[0, 1],
                    help="A-B (default 0-1)")
    ap.add_argument("--sweep", type=depth_list, default=[1, 2, 3, 5, 8, 12, 15],
                    help="depths of the J sweep, e.g. 1-15 or 1,2,3,5,8,12,15")
    ap.add_argument("--tau", type=float, default=0.1)
    ap.add_argument("--topology", default="rgg10")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "reproduce-dsc")
    ap.add_argument("--tiny", action="store_true", help="smoke budget: 16x16 scenes, 200/40")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    sweep_extra = [j for j in opts.sweep if j not in TABLE_DEPTHS]
    count = len(opts.seeds) * (1 + len(METHODS) * len(TABLE_DEPTHS) + len(sweep_extra))
    print(f"DSC reproduction on SynthScenes ({'16x16 tiny' if opts.tiny else '32x32'}): "
          f"{opts.topology}, NYU-like portfolios, mini routed ResNet (K = 8), TDMA; budget: "
          f"{opts.rounds} rounds x E = {opts.epochs}, tau = {opts.tau}, seeds {opts.seeds}, "
          f"J sweep {opts.sweep}: {count} runs, estimated {estimate_minutes(opts, count):.0f} min "
          "on 2 idle cores; Delta_all mean +- 95% t-interval over seeds")
    sys.stdout.flush()
    started = time.monotonic()
    done = run_all(opts)
    topology = Path(opts.topology).stem

    def runs(name: str) -> list[dict[str, Any]]:
        return [done[(name, topology, s)] for s in opts.seeds]

    noagg = runs(NOAGG)
    rows = {REFERENCE: noagg}
    for j in TABLE_DEPTHS:
        for m in METHODS:
            rows[f"{m.label} (J={j})"] = runs(f"{m.protocol}-J{j}")
    print_table(rows)
    sweep = {j: runs(f"{PROPOSED.protocol}-J{j}") for j in opts.sweep}
    depth = sweep_report(sweep, noagg)
    print("\nThe paper's orderings at this budget:")
    for line in orderings(rows):
        print(f"  - {line}")
    (opts.out / "table.json").write_text(json.dumps({
        "rounds": opts.rounds, "epochs": opts.epochs, "seeds": opts.seeds, "tau": opts.tau,
        "delta_all": {k: [s["delta_all"] for s in v] for k, v in rows.items()},
        "sweep": depth}, indent=1, default=str) + "\n")
    print(f"\ntable: {opts.out / 'table.json'}  ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
