"""Every figure and table of a paper's experimental section, one command away:

    python -m bench.reproduce PAPER [EXPERIMENT ...] [--budget quick|medium|paper]
                              [--out DIR] [--data-root DIR] [--list]
                              [--backend local|slurm] [--jobs N] [SLURM OPTIONS]
                              [--check-estimate [--rounds K]]

PAPER is dmfl-sq, ssd-fl, dsc or clippedgossip; without EXPERIMENT, every experiment of the paper
that can be reproduced here. Each runs its arms as real meshes (sweeps: a finished run is kept, an
interrupted one resumed by the same command), then writes OUT/<experiment>.json (every number), .md
(our table with the majority-class share under it, the paper's numbers, each of the paper's claims
for that experiment judged holds / does not hold / not resolved / not measured / not trained on
paired differences over the shared seeds (bench/reproduce/judge.py), and where the paper
contradicts itself the measurement that shows it) and .png, and prints the .md. Budgets: quick (a
few rounds on small meshes: CI's slow suite), medium (at most 60 minutes per experiment on a 2-core
machine, the proposed method trained, runs shared between experiments), paper (the paper's own
rounds, epochs, seeds and N; the time left, from each recipe's measured costs, is printed first).
OUT defaults to runs/reproduce/PAPER/BUDGET. --backend slurm makes each run a Slurm job, submitted
and followed from this host as `dfl-launch slurm --submit` does, every run of the experiments
queued at once (up to --jobs N), the outputs written once all have finished; `dfl-launch slurm`'s
options (--time, --cpus-per-task, --slurm-partition, ...) say what each job asks for
(docs/slurm.md). --check-estimate runs, for each EXPERIMENT, only its first arm's first seed (cut
to --rounds K rounds if given) and sets its wall time beside what the budget's estimate says that
run costs (bench/reproduce/estimate_check.py; OUT/estimate-check/<experiment>.json)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from bench.reproduce import backend, deviations, estimate_check
from bench.reproduce.arms import RunsFailed, run_arms, run_sweeps, sweeps
from bench.reproduce.experiment import Recipe, judge_claim
from bench.reproduce.measures import measure
from bench.reproduce.outputs import to_json, write
from bench.reproduce.paperdata import Paper, load_paper
from bench.reproduce.recipes import RECIPES
from launcher.errors import LaunchError
from launcher.sweep.runner import finished

ROOT = Path(__file__).resolve().parents[2]
BUDGETS = ("quick", "medium", "paper")
DATA_ROOT = ROOT.parent / "shared" / "data"


class Parser(argparse.ArgumentParser):
    """Bad input is one line on stderr and exit 2, as everywhere in the project; argparse's
    own would print the whole usage first."""

    def error(self, message: str) -> NoReturn:
        raise SystemExit(usage(message))


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = Parser(prog="python -m bench.reproduce", description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("paper", choices=sorted(RECIPES))
    ap.add_argument("experiments", nargs="*", metavar="EXPERIMENT")
    ap.add_argument("--budget", choices=BUDGETS, default="quick")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--data-root", type=Path, default=None,
                    help="where CIFAR-10 is (default: shared/data beside the checkout, if there)")
    ap.add_argument("--list", action="store_true",
                    help="list the paper's experiments and what each needs, run nothing")
    ap.add_argument("--check-estimate", action="store_true",
                    help="run each experiment's first arm once and compare its wall time with "
                         "the estimate of that run")
    ap.add_argument("--rounds", type=int, default=None, metavar="K",
                    help="with --check-estimate: cut the run to K rounds")
    backend.add_arguments(ap)
    opts = ap.parse_args(argv)
    if opts.rounds is not None and (not opts.check_estimate or opts.rounds < 1):
        ap.error("--rounds K takes a K of at least 1, and only with --check-estimate")
    opts.out = opts.out or ROOT / "runs" / "reproduce" / opts.paper / opts.budget
    if opts.data_root is None and DATA_ROOT.is_dir():
        opts.data_root = DATA_ROOT
    return opts


def chosen(paper: Paper, names: list[str], recipes: dict[str, Recipe]) -> list[str]:
    """The experiments to run; exit 2 naming one that is unknown or cannot be run here. An
    experiment on data not obtainable here may still have a proxy recipe (DMFL-SQ's MUSMET
    tables on CIFAR-10): it runs, and its claims stay unjudged."""
    known = {e.id: e for e in paper.experiments}
    for name in names:
        if name not in known:
            raise SystemExit(usage(f"{paper.id} has no experiment {name!r} (it has: "
                                   f"{', '.join(known)})"))
        if name not in recipes:
            raise SystemExit(usage(f"{paper.id} {name} ({known[name].label}) cannot be "
                                   f"reproduced here: {known[name].why_not}"))
    return names or [e.id for e in paper.experiments if e.id in recipes]


def usage(line: str) -> int:
    print(f"python -m bench.reproduce: {line}", file=sys.stderr)
    return 2


def estimate_seconds(recipes: dict[str, Recipe], out: Path) -> float:
    """Wall seconds for the runs not finished yet (each distinct run once), at each recipe's
    measured costs here (Recipe.cost)."""
    todo: dict[str, float] = {}
    for recipe in recipes.values():
        for arm in recipe.arms:
            variant = arm.variant(recipe.common)
            for seed in recipe.seeds:
                run_dir = out / variant.name / Path(arm.topology).stem / "defaults" / \
                    f"seed-{seed}"
                if not finished(run_dir):
                    todo[str(run_dir)] = recipe.cost.seconds(arm.protocol, variant.settings)
    return sum(todo.values())


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    try:
        runner = backend.runner(opts)
    except LaunchError as exc:
        raise SystemExit(usage(str(exc))) from None
    paper = load_paper(opts.paper)
    module = RECIPES[opts.paper]
    data_root = str(opts.data_root) if opts.data_root else None
    recipes = {name: backend.for_backend(recipe, opts.backend)
               for name, recipe in module.recipes(opts.budget, opts.out, data_root).items()}
    names = chosen(paper, opts.experiments, recipes)
    if opts.list:
        for e in paper.experiments:
            what = f"{len(recipes[e.id].arms)} arms x {len(recipes[e.id].seeds)} seeds" \
                if e.id in recipes else f"not reproducible: {e.why_not}"
            print(f"{e.id:<10} {e.label:<10} {what}")
        return 0
    runs = opts.out / "runs"
    wanted = {n: recipes[n] for n in names}
    if opts.check_estimate:
        try:
            for name in names:
                print(estimate_check.line(estimate_check.check(
                    paper.id, name, opts.budget, wanted[name], opts.out, opts.rounds, runner)),
                    flush=True)
        except RunsFailed as exc:
            print(exc, file=sys.stderr)
            return 1
        return 0
    hours = estimate_seconds(wanted, runs) / 3600
    print(f"{paper.id}: {', '.join(names)} at budget {opts.budget}; about {hours:.1f} h of "
          f"runs left at this machine's pace (its measured costs"
          f"{'' if opts.backend == 'local' else ', here one after another'}); outputs in "
          f"{opts.out}", flush=True)
    try:
        if opts.backend == "slurm":  # every run queued at once; below, each is found finished
            run_sweeps([spec for r in wanted.values()
                        for spec, _ in sweeps(r.arms, r.seeds, runs, r.common)], runner)
        for name in names:
            experiment, recipe = paper.experiment(name), wanted[name]
            done = run_arms(recipe.arms, recipe.seeds, runs, recipe.common, runner)
            results = {arm: [measure(d, seed) for d, seed in zip(dirs, recipe.seeds,
                                                                    strict=True)]
                       for arm, dirs in done.items()}
            if recipe.derive is not None:
                recipe.derive(results)
            judged = [judge_claim(c, results, recipe.trained, recipe.cut)
                      for c in experiment.claims]
            findings = {k: f(results) for k, f in recipe.findings.items()}
            table = deviations.rows(recipe.arms, recipe.common, recipe.seeds, recipe.stated,
                                    recipe.why, recipe.parameters)
            record = to_json(paper, experiment, opts.budget, recipe, results, judged,
                             findings, table)
            marked = paper.experiment(recipe.figure.marks_from or name).numbers
            print(write(opts.out, record, [n.model_dump() for n in marked]), flush=True)
    except RunsFailed as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
