"""`dfl-launch jstar`: DSC's optimal aggregation depth for a run or a J sweep
(docs/protocols/dsc.md#a14).

    dfl-launch jstar --rho 0.8 --A 0.5 --aB 1            # Eq. 40-41 and the integer rule
    dfl-launch jstar --run RUN_DIR --A 0.25 --aB 1       # rho(W) of a dsc run (exact, eigvals)
    dfl-launch jstar --sweep DIR_J1 --sweep DIR_J5 ...   # fit (A, alpha B) from a J sweep

rho is the run's time-averaged subdominant eigenvalue modulus of W (summary `rho_mean`, from the
rows every node reported); `--rho` overrides it. A sweep's error per depth is
-Delta_all (`--metric delta_all`, the runs need `delta_baseline`) or the mean final training loss
(`--metric loss`); the fit and the bound are in protocols/dsc/depth.py. Output: one JSON object.

DSC declares the command (`launch_commands`); `dfl-launch` adds it. Bad input is a
ClickException, which `dfl-launch` turns into its one line on stderr and exit 2.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from protocols.dsc.depth import bound, continuous_depth, deployed_depth, fit_constants
from protocols.dsc.hyper import DSCHyper

METRICS = ("delta_all", "loss")


def read_summary(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "summary.json"
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise click.ClickException(f"{path}: cannot read the run summary: {exc}") from None


def run_rho(summary: dict[str, Any], where: Path) -> float:
    rho = summary.get("rho_mean")
    if not isinstance(rho, int | float):
        raise click.ClickException(f"{where}: summary has no rho_mean (not a dsc run?)")
    return float(rho)


def sweep_point(run_dir: Path, metric: str) -> tuple[int, float, float]:
    """(J, error, rho) of one run of a sweep."""
    summary = read_summary(run_dir)
    # A run at the default J has none in its config.
    depth = summary.get("config", {}).get("hyper", {}).get("depth",
                                                         DSCHyper.model_fields["depth"].default)
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise click.ClickException(f"{run_dir}: config's hyper.depth is not an integer")
    if metric == "delta_all":
        value = summary.get("delta_all")
        if not isinstance(value, int | float):
            raise click.ClickException(f"{run_dir}: summary has no delta_all (set delta_baseline)")
        error = -float(value)
    else:
        losses = [n["loss"] for n in summary.get("nodes", []) if n.get("loss") is not None]
        if not losses:
            raise click.ClickException(f"{run_dir}: summary has no node losses")
        error = sum(losses) / len(losses)
    return depth, error, run_rho(summary, run_dir)


def depth_report(rho: float, a: float, ab: float, j_max: int) -> dict[str, Any]:
    star = continuous_depth(a, ab, rho)
    return {"rho": rho, "A": a, "aB": ab, "j_max": j_max,
            "j_star": None if math.isinf(star) else star,
            "j_deployed": deployed_depth(a, ab, rho, j_max),
            "bound": [[j, bound(j, a, ab, rho)] for j in range(1, j_max + 1)]}


@click.command("jstar")
@click.option("--rho", type=float, default=None, help="rho(W); else from --run or the sweep.")
@click.option("--run", "run_dir", type=click.Path(path_type=Path), default=None,
              help="A dsc run directory: rho(W) from its mixing matrices.")
@click.option("--A", "a", type=float, default=None, help="The bound's A (statistical term).")
@click.option("--aB", "ab", type=float, default=None, help="alpha B (over-consensus bias).")
@click.option("--sweep", "sweep", type=click.Path(path_type=Path), multiple=True,
              help="Run directories of a J sweep (one per depth): fit A and alpha B.")
@click.option("--metric", type=click.Choice(METRICS), default="delta_all", show_default=True,
              help="A sweep's error per depth: -Delta_all (needs delta_baseline) or the loss.")
@click.option("--j-max", "j_max", type=int, default=15, show_default=True,
              help="The largest depth J the bound is evaluated at and deployed up to.")
def jstar_cmd(rho: float | None, run_dir: Path | None, a: float | None, ab: float | None,
              sweep: tuple[Path, ...], metric: str, j_max: int) -> None:
    """DSC's optimal depth J*: Bound(J), Eq. 41, the integer rule, and the sweep fit."""
    points = [sweep_point(d, metric) for d in sweep]
    if rho is None and run_dir is not None:
        rho = run_rho(read_summary(run_dir), run_dir)
    if rho is None and points:
        rho = sum(p[2] for p in points) / len(points)
    if rho is None:
        raise click.ClickException("jstar: give --rho, --run or --sweep")
    out: dict[str, Any] = {}
    try:
        if points:
            fit = fit_constants([p[0] for p in points], [p[1] for p in points], rho)
            a, ab = fit.a, fit.ab
            best = min(points, key=lambda p: p[1])
            out["fit"] = {"c0": fit.c0, "A": fit.a, "aB": fit.ab, "rms": fit.residual,
                          "metric": metric, "measured_best_j": best[0],
                          "points": {str(p[0]): p[1] for p in sorted(points)}}
        if a is None or ab is None:
            raise click.ClickException("jstar: give --A and --aB, or --sweep to fit them")
        out |= depth_report(rho, a, ab, j_max)
    except ValueError as exc:
        raise click.ClickException(f"jstar: {exc}") from None
    click.echo(json.dumps(out, indent=1, sort_keys=True))
