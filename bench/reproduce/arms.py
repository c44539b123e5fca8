"""The runs an experiment needs, as arms: one method of the paper at one point of the
experiment's axes (tau_a = 5, graph = er30, J = 3, ...), run once per seed as a real mesh.

An arm's run directory is named for its method, its point and a digest of everything it is run
with, under one folder per paper and budget: two experiments that need the same run (Fig. 2's
DMFL-SQ and Table III's full row) share it, a finished run is never run again, and an interrupted
one resumes (the sweep runner, docs/sweeps.md).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.reproduce.graphs import materialize
from bench.reproduce.provenance import checkout_commit, stamp
from bench.sweeps import why
from dfl_node.state.checkpoint_layout import checkpoints_dir
from launcher.errors import LaunchError
from launcher.run.finish import EXIT_INTERRUPTED
from launcher.sweep.grid import points
from launcher.sweep.runner import SweepResult, finished, run_sweep
from launcher.sweep.spec import SweepSpec, Variant

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, eq=False)
class Arm:
    """Compared by identity: an experiment's arms are distinct by construction."""

    method: str
    """The method as the paper names it ("DMFL-SQ", "DMFL-SQ rho=0", "sDFL")."""
    protocol: str
    topology: str
    """A shipped topology name or a topology file."""
    at: Mapping[str, Any] = field(default_factory=dict)
    """Where on the experiment's axes this arm sits ({"tau_a": 5, "level": "extreme"}); what a
    claim's condition and a trend's `along` select on."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Run settings (config keys and run options, as a sweep's), on top of the experiment's."""
    config: Path | None = None
    shared_model: bool = False
    """Its clients train one model together (consensus or a server's), not one each: whether
    it trained is read on the global test subset where the runs evaluate one
    (experiment.not_trained)."""

    def label(self) -> str:
        point = ", ".join(f"{k}={v}" for k, v in self.at.items())
        return f"{self.method} ({point})" if point else self.method

    def variant(self, common: Mapping[str, Any]) -> Variant:
        """Named for the protocol and a digest of what it runs, not for the method or its
        point: arms that run the same thing share their runs (Fig. 2's DMFL-SQ and Table III's
        full row; DSC's task pairs of Fig. 4, all read from one run)."""
        settings = {**common, **self.settings}
        config = "" if self.config is None else str(
            self.config.resolve().relative_to(ROOT) if self.config.resolve().is_relative_to(ROOT)
            else self.config)
        digest = hashlib.sha256(json.dumps(
            [self.protocol, Path(self.topology).stem, config, settings],
            sort_keys=True, default=str).encode()).hexdigest()[:8]
        return Variant(name=f"{self.protocol}-{digest}", protocol=self.protocol, config=self.config,
                       settings=settings)


def drop_checkpoints(run_dir: Path) -> None:
    """A finished run's checkpoints go: they serve only to resume it, and a reproduction keeps
    dozens of runs (DMFL-SQ's medium Figs. 2-7 held 56 GB of them here, 1.3 GB a run, until the
    disk was full). An unfinished run keeps them, so the same command resumes it."""
    if finished(run_dir):
        shutil.rmtree(checkpoints_dir(run_dir), ignore_errors=True)


class RunsFailed(SystemExit):
    """A run of the experiment did not finish; the message names it."""


# Runs the sweeps it is given, each run whose directory is not finished yet; a result per
# sweep it ran (this machine's: launcher/sweep/runner.py; Slurm's: bench/reproduce/backend.py).
Runner = Callable[[list[SweepSpec]], list[SweepResult]]


def run_here(specs: list[SweepSpec]) -> list[SweepResult]:
    """On this machine, one sweep after another, plots off (the experiment draws its own
    figure); an interrupted or failed sweep is the last (the command then exits)."""
    results: list[SweepResult] = []
    for spec in specs:
        results.append(run_sweep(spec, progress=False, plots=False, on_report=lambda _: None))
        if results[-1].exit_code != 0:
            break
    return results


def sweeps(arms: Sequence[Arm], seeds: Sequence[int], out: Path,
           common: Mapping[str, Any]) -> list[tuple[SweepSpec, dict[Arm, Variant]]]:
    """One sweep per topology (a sweep is variants x topologies), with the variant each of its
    arms runs; the generated topologies written."""
    by_topology: dict[str, list[Arm]] = {}
    for arm in arms:
        by_topology.setdefault(arm.topology, []).append(arm)
    planned = []
    for topology, group in by_topology.items():
        materialize(topology)
        variants = {arm: arm.variant(common) for arm in group}
        unique = list({v.name: v for v in variants.values()}.values())
        planned.append((SweepSpec(out=out, variants=unique, topologies=[topology],
                                  seeds=list(seeds)), variants))
    return planned


def run_sweeps(specs: list[SweepSpec], runner: Runner) -> None:
    """Run what is not finished yet, stamping each run it finishes with this checkout's commit
    (bench/reproduce/provenance.py); return once all of it is finished. Exits like the
    reproduction scripts: 2 on bad input, 130 when interrupted (the same command resumes), 1
    naming the first run that failed."""
    unfinished = [p.run_dir for spec in specs for p in points(spec) if not finished(p.run_dir)]
    made_by = checkout_commit()
    try:
        results = runner(specs)
    except LaunchError as exc:
        print(f"bench.reproduce: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    stamp([d for d in unfinished if finished(d)], made_by)  # an interrupted sweep's too
    if any(result.interrupted for result in results):
        print("bench.reproduce: interrupted; the same command again resumes", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED)
    ran = [p for result in results for p in result.points]
    for point in ran:
        drop_checkpoints(point.run_dir)
    failed = [p for p in ran if not finished(p.run_dir)]
    if failed:
        raise RunsFailed(f"bench.reproduce: {len(failed)} of {len(ran)} runs failed, the "
                         f"first {failed[0].label}: {why(failed[0])} (see {failed[0].run_dir})")


def run_arms(arms: Sequence[Arm], seeds: Sequence[int], out: Path, common: Mapping[str, Any],
             runner: Runner = run_here) -> dict[Arm, list[Path]]:
    """Each arm's finished run directories, in seed order; run what is not finished yet."""
    planned = sweeps(arms, seeds, out, common)
    run_sweeps([spec for spec, _ in planned], runner)
    done: dict[Arm, list[Path]] = {}
    for spec, variants in planned:
        dirs = {(p.variant.name, p.seed): p.run_dir for p in points(spec)}
        for arm, variant in variants.items():
            done[arm] = [dirs[(variant.name, seed)] for seed in seeds]
    return done
