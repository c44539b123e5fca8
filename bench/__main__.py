"""`python -m bench`: the performance suite, one table of figures, each beside its reference.

    python -m bench [--quick | --full] [--only transport,overhead,...] [--data-root DIR]
                    [--json FILE]

`--quick` (the default) is meant to end within 10 minutes on a 2-core machine: it runs the
short part of the long groups (SHORT: round_cost on ring20, scale's ring of 20 nodes,
first_run's README protocol), and their row `SKIPPED: --full only ...` says what it leaves out
(round_cost's ER(50) rows, scale's 100-, 200- and 500-node rings, every other protocol's first
run). `--full` runs every group whole, with more
repetitions and larger meshes; so does naming a group in `--only` (`--only scale`, quick
repetitions). Every figure with a reference is a ratio of two things measured in the same run
(bench/figures.py), because absolute times on a shared machine are noise. The table goes to
stdout with the machine's cores and memory, and the figures to JSON (default
runs/bench-<time>.json). The paper reproductions (python -m bench.reproduce) are not part of it.

The JSON is written again as each group ends (a new file renamed over the old one, so a reader
or a `kill -9` never finds half a file), with `"state": "running"` until the suite ends, so the
figures of every finished group are on disk whatever happens next. A group that measures
nothing still has its row: SKIPPED when what it needs is missing (a dataset: the group asks
the launcher's locator before any run, and the row says where it looked and how to pass the
data), FAILED when it raised (a run that failed: the launcher's last words); the other groups
still run. Ctrl-C, SIGTERM (a job scheduler's or CI's time limit) and SIGHUP stop the suite
with the group that runs and every process it started (bench/stopping.py); that group's row is
INTERRUPTED, and the table and the JSON of what was measured are written, with the state
saying which signal it was. `--data-root DIR` goes to the groups that run on a real dataset
(compute: CIFAR-10), as `dfl-launch --data-root`. Exit code 130 after Ctrl-C, 143 after
SIGTERM, 1 after SIGHUP (dfl-launch's codes), else 1 when a group failed, else 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from bench import (
    compute,
    first_run,
    overhead,
    refusal_cost,
    round_cost,
    scale,
    startup,
    transport,
    wire_efficiency,
)
from bench.figures import Figure, not_measured, table
from bench.launch import DataMissing
from bench.stopping import SuiteStop, installed
from launcher.stop_signals import describe, exit_code, signal_of


@dataclass(frozen=True)
class TakesDataRoot:
    """A group measured on a real dataset, called as `figures(quick, data_root)` with
    `--data-root` (None: the group's own default). Before any run it calls
    bench.launch.require_data, whose DataMissing becomes its SKIPPED row."""

    figures: Callable[[bool, Path | None], list[Figure]]


# A group is `figures(quick) -> list[Figure]`, or TakesDataRoot(figures) when it needs data.
Group = Callable[[bool], list[Figure]] | TakesDataRoot

GROUPS: dict[str, Group] = {
    "transport": transport.figures, "overhead": overhead.figures,
    "round_cost": round_cost.figures, "startup": startup.figures, "scale": scale.figures,
    "compute": TakesDataRoot(compute.figures), "wire_efficiency": wire_efficiency.figures,
    "first_run": first_run.figures, "refusal": refusal_cost.figures}

# The long groups' short part, which a quick suite runs unless the group is named in --only.
SHORT: dict[str, Group] = {"round_cost": partial(round_cost.figures, whole=False),
                           "scale": partial(scale.figures, whole=False),
                           "first_run": partial(first_run.figures, whole=False)}


def machine() -> dict[str, object]:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cores": os.cpu_count(), "memory_gib": round(memory, 1),
            "python": platform.python_version(), "platform": platform.platform()}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="the default: within 10 minutes, the long groups' short part")
    size.add_argument("--full", action="store_true",
                      help="every group whole, more repetitions, larger meshes")
    parser.add_argument("--only", default=None,
                        help=f"comma-separated groups, each run whole (default: all of "
                             f"{', '.join(GROUPS)}; with --quick the short part of "
                             f"{', '.join(SHORT)})")
    parser.add_argument("--data-root", type=Path, default=None, metavar="DIR",
                        help="the datasets of the groups that need one, as dfl-launch "
                             "--data-root reads them (default: each group's own; compute: "
                             f"{compute.DATA_ROOT})")
    parser.add_argument("--json", type=Path, default=None,
                        help="where the figures go (default runs/bench-<time>.json)")
    args = parser.parse_args(argv)
    unknown = sorted(set((args.only or "").split(",")) - set(GROUPS) - {""})
    if unknown:
        parser.exit(2, f"python -m bench: --only: unknown group(s) {', '.join(unknown)}; "
                       f"known: {', '.join(GROUPS)}\n")
    if args.data_root is not None:  # the launcher runs from the repository root, not from here
        args.data_root = args.data_root.absolute()
    return args


def measure(name: str, group: Group, quick: bool, data_root: Path | None) -> list[Figure]:
    """The group's figures, or its one SKIPPED or FAILED row: a group that cannot measure must
    not cost the figures of the others."""
    try:
        if isinstance(group, TakesDataRoot):
            return group.figures(quick, data_root)
        return group(quick)
    except DataMissing as exc:
        return [not_measured(name, "skipped", str(exc))]
    except (Exception, SystemExit) as exc:  # SystemExit: bench.launch's failed run
        if not isinstance(exc, SystemExit):
            traceback.print_exc()
        text = str((exc.code or "") if isinstance(exc, SystemExit) else exc) or type(exc).__name__
        first, _, rest = text.partition("\n")
        reason = first if isinstance(exc, SystemExit) else f"{type(exc).__name__}: {first}"
        return [not_measured(name, "failed", reason, rest)]


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    quick = not args.full
    chosen = [g for g in GROUPS if args.only is None or g in args.only.split(",")]
    out = args.json or Path("runs") / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    seconds: dict[str, float] = {}
    cpu: dict[str, float] = {}
    info: dict[str, object] = {
        **machine(), "mode": "quick" if quick else "full", "seconds": 0.0,
        "group_seconds": seconds, "group_cpu_seconds": cpu,
        "data_root": str(args.data_root) if args.data_root else None}
    print(f"bench: figures to {out}, written as each group ends", file=sys.stderr, flush=True)
    started = time.monotonic()
    figures: list[Figure] = []
    with installed() as stop:
        try:
            for group in chosen:
                runner = SHORT[group] if quick and args.only is None and group in SHORT \
                    else GROUPS[group]
                figures += run_group(group, runner, quick, args.data_root, stop, seconds, cpu)
                info["seconds"] = round(time.monotonic() - started, 1)
                if stop.signum is not None:
                    break
                write_json(out, "running", figures, info)
        except KeyboardInterrupt as exc:  # between two groups: each finished one is written
            stop.signum = stop.signum or signal_of(exc)
        info["seconds"] = round(time.monotonic() - started, 1)
        state = "finished" if stop.signum is None else describe(stop.signum)
        write_json(out, state, figures, info)
        print_table(figures, info, out)
    if stop.signum is not None:
        return exit_code(stop.signum)
    return 1 if any(f.outcome == "failed" for f in figures) else 0


def run_group(name: str, group: Group, quick: bool, data_root: Path | None, stop: SuiteStop,
              seconds: dict[str, float], cpu: dict[str, float]) -> list[Figure]:
    """The group's figures (measure), or its INTERRUPTED row when a stop signal came while it
    ran, also if the group's clean-up then raised something else; its wall time goes to
    `seconds`, its CPU time to `cpu`."""
    begun, cpu_before = time.monotonic(), cpu_seconds()
    print(f"bench: {name} ...", file=sys.stderr, flush=True)
    try:
        found = measure(name, group, quick, data_root)
    except KeyboardInterrupt as exc:  # raised by stop.handle, or by hand (Ctrl-C's)
        stop.signum = stop.signum or signal_of(exc)
        found = []
    seconds[name] = round(time.monotonic() - begun, 1)
    cpu[name] = round(cpu_seconds() - cpu_before, 1)
    if stop.signum is not None:
        return [not_measured(name, "interrupted", f"{describe(stop.signum)} {seconds[name]:.0f} "
                                                  "s into the group; its figures are lost")]
    return found


def cpu_seconds() -> float:
    """CPU seconds of the suite and of the processes it started and waited for (a launcher's
    include its nodes'). On a shared machine a group's wall time says more of the others' work
    than of the group; its CPU time over the cores is a floor of its time on a quiet one."""
    own, done = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + done.ru_utime + done.ru_stime


def write_json(out: Path, state: str, figures: list[Figure], info: dict[str, object]) -> None:
    """The figures so far, as a new file renamed over `out`: never half of one on disk."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial_file = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        partial_file.write_text(json.dumps(
            {"state": state, "machine": info, "figures": [f.as_dict() for f in figures]},
            indent=1))
        partial_file.replace(out)
    finally:
        partial_file.unlink(missing_ok=True)


def print_table(figures: list[Figure], info: dict[str, object], out: Path) -> None:
    """The table on stdout, under the machine; after SIGHUP there may be no terminal to
    print to, and the JSON is written already."""
    with contextlib.suppress(OSError):
        print(f"machine: {info['cores']} cores, {info['memory_gib']} GiB, Python "
              f"{info['python']}; {info['mode']} run in {info['seconds']:.0f} s")
        print(table(figures))
        print(f"figures: {out}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
