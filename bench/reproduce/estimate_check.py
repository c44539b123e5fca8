"""Whether the time a budget's estimate promises can be trusted, measured on one run.

The estimate printed before a budget starts (Recipe.cost, summed over the runs left) is made of
costs measured on pieces: a round of one model, an evaluation, start-up. A paper-budget run
here takes from minutes (DSC) to hours (an SSD-FL run of 20 cycles on the paper's CNN), so the
whole budget cannot be timed, but one of its runs can: the experiment's first arm and first
seed, at the budget's own model, epochs and N, cut to `rounds` rounds where a whole run is
too long (the cut changes how many rounds are paid for, not what one costs). Its wall time
(summary.json's, what every experiment's own "wall time of its runs" adds up) is set beside
the estimate of that same run. The load average is kept beside it: the estimate is for an idle
machine, and a busy one stretches the wall time.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.reproduce.arms import Runner, run_arms
from bench.reproduce.experiment import Recipe
from bench.reproduce.provenance import checkout_commit

FOLDER = "estimate-check"


def check(paper_id: str, experiment: str, budget: str, recipe: Recipe, out: Path,
          rounds: int | None, runner: Runner) -> dict[str, Any]:
    """Run the check (a finished one is kept and read again) and write
    OUT/estimate-check/<experiment>.json, its run under OUT/estimate-check/runs; the record."""
    arm = recipe.arms[0]
    if rounds is not None:
        arm = replace(arm, settings={**arm.settings, "rounds": rounds})
    seed = recipe.seeds[0]
    settings = arm.variant(recipe.common).settings
    load_before = os.getloadavg()[0]
    runs = out / FOLDER / "runs"
    run_dir = run_arms([arm], [seed], runs, recipe.common, runner)[arm][0]
    summary = json.loads((run_dir / "summary.json").read_text())
    measured = float(summary["wall_seconds"])
    estimated = recipe.cost.seconds(arm.protocol, settings)
    record = {
        "paper": paper_id, "experiment": experiment, "budget": budget,
        "method": arm.label(), "protocol": arm.protocol, "seed": seed,
        "rounds": int(settings.get("rounds", 0)) or None, "cut": rounds is not None,
        "estimated_seconds": estimated, "measured_seconds": measured,
        "ratio": measured / estimated if estimated > 0 else None,
        "load_average": {"before": load_before, "after": os.getloadavg()[0]},
        "cores": os.cpu_count(), "commit": checkout_commit(), "run": str(run_dir.relative_to(runs)),
    }
    (out / FOLDER / f"{experiment}.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def what_ran(record: dict[str, Any]) -> str:
    """The checked run: its method and seed, and its cut if it was cut."""
    rounds = record["rounds"]
    cut = f", cut to {rounds} round{'' if rounds == 1 else 's'}" if record["cut"] else ""
    return f"{record['method']}, seed {record['seed']}{cut}"


def line(record: dict[str, Any]) -> str:
    """One line for a person: what ran, what was promised, what it took."""
    ratio = "-" if record["ratio"] is None else f"{record['ratio']:.2f}x"
    return (f"{record['paper']} {record['experiment']} at budget {record['budget']}: "
            f"{what_ran(record)}: estimated "
            f"{record['estimated_seconds'] / 60:.1f} min, measured "
            f"{record['measured_seconds'] / 60:.1f} min ({ratio}; load average "
            f"{record['load_average']['before']:.1f} before, "
            f"{record['load_average']['after']:.1f} after, on {record['cores']} cores)")
