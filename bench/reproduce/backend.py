"""Where a reproduction's runs go (`--backend`): meshes on this machine, or Slurm jobs.

Local runs one sweep after another, each as `dfl-launch sweep` does, and writes an experiment's
outputs as soon as its runs are done. On Slurm (launcher/slurm/sweep.py) every run of every
experiment asked for is queued first, up to `--jobs` at once, and the outputs follow once all
have finished: a cluster runs them side by side, so a paper budget takes the time of its longest
runs, not of all of them one after another. Either way a finished run is kept and an
interrupted one resumed by the same command, and a run is the same bytes under both: the plan
decides everything it computes.

What each job asks Slurm for is `dfl-launch slurm`'s options, taken from the same table
(launcher/slurm/resource_options.py) with the same defaults, which live in the typed models
(`Resources`, `SlurmSweep`) and nowhere here.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from bench.reproduce.arms import Runner, run_here
from bench.reproduce.experiment import Recipe
from launcher.errors import LaunchError
from launcher.slurm.commands import require_clients
from launcher.slurm.resource_options import COLLECTOR_HOST, RESOURCE_OPTIONS, resources_of
from launcher.slurm.sweep import SlurmSweep, run_on_slurm
from launcher.sweep.runner import SweepResult
from launcher.sweep.spec import SweepSpec

BACKENDS = ("local", "slurm")
SLURM_OPTIONS = (*RESOURCE_OPTIONS, COLLECTOR_HOST)
JOBS = "--jobs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=BACKENDS, default="local",
                        help="where the runs go: meshes on this machine, or one Slurm job each "
                             "(docs/slurm.md)")
    group = parser.add_argument_group("with --backend slurm (each run's job)")
    group.add_argument(JOBS, type=int, default=None, metavar="N",
                       help=f"runs queued at once [default: {SlurmSweep().jobs}]")
    for option in SLURM_OPTIONS:
        if option.is_flag:
            group.add_argument(option.flag, dest=option.dest, action="store_true",
                               default=None, help=option.help)
        else:
            shown = "" if option.default is None else f" [default: {option.default}]"
            group.add_argument(option.flag, dest=option.dest, type=option.kind, default=None,
                               metavar=option.metavar or option.kind.__name__.upper(),
                               help=option.help + shown)


def runner(opts: argparse.Namespace) -> Runner:
    """How the runs go; a LaunchError (bad input, one line) before anything is written: a Slurm
    option without Slurm, a value Slurm would refuse, Slurm's client commands missing here."""
    given = [flag for flag, dest in ((JOBS, "jobs"), *((o.flag, o.dest) for o in SLURM_OPTIONS))
             if getattr(opts, dest) is not None]
    if opts.backend == "local":
        if given:
            raise LaunchError(f"{given[0]}: only with --backend slurm")
        return run_here
    values = vars(opts)
    sweep = SlurmSweep(resources_of(values), **{k: values[k] for k in ("jobs", "collector_host")
                                                if values[k] is not None})
    sweep.check()
    require_clients()

    def run(specs: list[SweepSpec]) -> list[SweepResult]:
        return run_on_slurm(specs, sweep, on_report=lambda _: None)

    return run


def for_backend(recipe: Recipe, backend: str) -> Recipe:
    """The recipe as `backend` runs it. A Slurm job's nodes are its tasks, over zmq: the quick
    budgets' `transport: inproc` (a smoke mesh as threads of one process) has no meaning there
    and goes, so those runs are directories of their own (named for what they run). The medium
    and paper budgets name no transport: their runs are shared by both backends."""
    if backend == "local" or "transport" not in recipe.common:
        return recipe
    return replace(recipe, common={k: v for k, v in recipe.common.items() if k != "transport"})
