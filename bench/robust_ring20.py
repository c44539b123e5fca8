"""The ring-of-20 note of issue 47 (docs/protocols/robust.md#measured-a-ring-of-20-under-attack):
runs bench/sweeps/robust-ring20.yaml (resumable: finished runs are skipped) and prints the
note's table, each arm's honest nodes over its seeds beside the attack-free run.

    python -m bench.robust_ring20 [--json docs/protocols/robust-ring20.json]

Each cell is mean +- the 95% t-interval over the seeds (dfl-report's statistic). `vs attack-free`
is the paired difference of the honest average accuracy from the no-attack run of the same seed
(the same split, initial model and batches; an `-iid` arm's from `no-attack-iid`, an `-ls10` arm's
from `no-attack-ls10`), with its own interval; `within 5 points` says whether that whole interval
lies above -0.05. The attack-free run has no adversaries, so its honest figures are every client's,
its consensus distance computed from its final models as the attacked runs' is.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from bench import sweeps
from bench.reproduce.judge import difference
from bench.seedstats import mean_ci
from launcher.results.honest import final_consensus_distance

SWEEP = "robust-ring20"  # bench/sweeps/robust-ring20.yaml
BASELINE = "no-attack"  # its variant without adversaries
IID = "-iid"  # the arms on IID shards, each compared with BASELINE + IID
LOCAL_STEPS = "-ls10"  # the arms with ten local steps a round, compared with BASELINE + it
TOLERANCE = 0.05  # the "within 5 points of the attack-free run"
METRICS = ("avg_accuracy", "worst_accuracy", "consensus_distance", "backdoor_asr")


def honest_values(summary: dict[str, Any]) -> dict[str, float | None]:
    """The honest nodes' metrics of one run; every client's in a run without adversaries."""
    if summary.get("adversaries"):
        honest = summary.get("honest") or {}
        return {m: honest.get(m) for m in METRICS}
    nodes = sorted(int(node["id"]) for node in summary["nodes"])
    return {"avg_accuracy": summary["avg_accuracy"], "worst_accuracy": summary["worst_accuracy"],
            "consensus_distance": final_consensus_distance(Path(summary["_dir"]), nodes),
            "backdoor_asr": None}


def baseline_of(arm: str) -> str:
    """The attack-free arm on the same data and schedule as `arm`."""
    return BASELINE + next((s for s in (IID, LOCAL_STEPS) if arm.endswith(s)), "")


def table(by_arm: dict[str, dict[int, dict[str, float | None]]]) -> list[dict[str, Any]]:
    """One row per arm: each metric's (mean, half-width) and the paired difference."""
    rows = []
    for arm, seeds in by_arm.items():
        row: dict[str, Any] = {"arm": arm, "seeds": sorted(seeds)}
        for metric in METRICS:
            # finite values only, as dfl-report's cells (a diverged model's distance is inf)
            values = [x for v in seeds.values()
                      if (x := v[metric]) is not None and math.isfinite(x)]
            row[metric] = list(mean_ci(values)) if values else None
        baseline = baseline_of(arm)
        if arm != baseline and baseline in by_arm:
            base = {s: v["avg_accuracy"] for s, v in by_arm[baseline].items()
                    if v["avg_accuracy"] is not None}
            mine = {s: v["avg_accuracy"] for s, v in seeds.items()
                    if v["avg_accuracy"] is not None}
            diff = difference(mine, base)
            if diff is not None:
                row["vs_attack_free"] = [diff.mean, diff.half]
                row["within_5_points"] = bool(diff.mean - (0 if math.isnan(diff.half)
                                                           else diff.half) >= -TOLERANCE)
        rows.append(row)
    return rows


def cell(value: list[float] | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    mean, half = value
    if abs(mean) >= 1e4:  # a diverged model
        return f"{mean:.1e}" + ("" if math.isnan(half) else f" +- {half:.1e}")
    return f"{mean:.{digits}f}" + ("" if math.isnan(half) else f" +- {half:.{digits}f}")


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ("| arm | honest avg acc | honest worst acc | honest consensus dist | backdoor ASR "
            "| vs attack-free (paired) | within 5 points |")
    lines = [head, "|" + " --- |" * 7]
    for r in rows:
        diff = r.get("vs_attack_free")
        within = "" if "within_5_points" not in r else ("yes" if r["within_5_points"] else "no")
        lines.append(f"| {r['arm']} | {cell(r['avg_accuracy'])} | {cell(r['worst_accuracy'])} "
                     f"| {cell(r['consensus_distance'], 2)} | {cell(r['backdoor_asr'])} "
                     f"| {'' if diff is None else cell(diff)} | {within} |")
    return "\n".join(lines)


GROUPS = (  # the note's tables: where the adversaries sit, and the data
    ("Placed apart (nodes 0 and 10), Dirichlet(0.5) shards",
     lambda arm: "-adjacent" not in arm and baseline_of(arm) == BASELINE),
    ("Side by side (nodes 0 and 1), Dirichlet(0.5) shards",
     lambda arm: arm == BASELINE or ("-adjacent" in arm and baseline_of(arm) == BASELINE)),
    ("IID shards (placed apart unless `-adjacent`)", lambda arm: arm.endswith(IID)),
    ("Placed apart, Dirichlet(0.5) shards, ten local steps a round",
     lambda arm: arm.endswith(LOCAL_STEPS)),
)


def grouped(rows: list[dict[str, Any]]) -> str:
    """The table in GROUPS, each with its heading (the attack-free row heads the first two)."""
    return "\n\n".join(f"{title}:\n\n" + markdown([r for r in rows if belongs(r["arm"])])
                        for title, belongs in GROUPS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    result = sweeps.run(sweeps.load(SWEEP), "robust-ring20")
    by_arm: dict[str, dict[int, dict[str, float | None]]] = {}
    for (arm, _, seed), summary in sweeps.summaries(result).items():
        by_arm.setdefault(arm, {})[seed] = honest_values(summary)
    rows = table(by_arm)
    print(grouped(rows))
    if args.json:  # NaN (no interval: one finite seed) as null, so that it is strict JSON
        text = json.dumps({"sweep": f"bench/sweeps/{SWEEP}.yaml", "rows": rows}, indent=1)
        args.json.write_text(json.dumps(json.loads(text, parse_constant=lambda _: None),
                                        indent=1) + "\n")


if __name__ == "__main__":
    main()
