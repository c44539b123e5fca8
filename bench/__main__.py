"""`python -m bench`: the performance suite, one table of figures, each beside its reference.

    python -m bench [--quick | --full] [--only transport,overhead,...] [--data-root DIR]
                    [--json FILE]

`--quick` (the default) fits in 15 minutes on a 2-core machine; `--full` takes more repetitions
and larger meshes. Every figure with a reference is a ratio of two things measured in the same
run (bench/figures.py), because absolute times on a shared machine are noise. The table goes to
stdout with the machine's cores and memory, and the figures to JSON (default
runs/bench-<time>.json). The paper reproductions (python -m bench.reproduce) are not part of it.

A group that measures nothing still has its row, so the table and the JSON are always written,
also after Ctrl-C (with what was measured until then; exit 130): SKIPPED when what it needs is
missing (a dataset: the group asks the launcher's locator before any run, and the row says
where it looked and how to pass the data), FAILED when it raised (a run that failed: the
launcher's last words); the other groups still run. `--data-root DIR` goes to the groups that
run on a real dataset (compute: CIFAR-10), as `dfl-launch --data-root`. Exit code 1 when a group
failed, else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
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


def machine() -> dict[str, object]:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cores": os.cpu_count(), "memory_gib": round(memory, 1),
            "python": platform.python_version(), "platform": platform.platform()}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="the default: under 15 minutes")
    size.add_argument("--full", action="store_true", help="more repetitions, larger meshes")
    parser.add_argument("--only", default=",".join(GROUPS),
                        help=f"comma-separated groups (default: all of {', '.join(GROUPS)})")
    parser.add_argument("--data-root", type=Path, default=None, metavar="DIR",
                        help="the datasets of the groups that need one, as dfl-launch "
                             "--data-root reads them (default: each group's own; compute: "
                             f"{compute.DATA_ROOT})")
    parser.add_argument("--json", type=Path, default=None,
                        help="where the figures go (default runs/bench-<time>.json)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only.split(",")) - set(GROUPS))
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
    started = time.monotonic()
    figures: list[Figure] = []
    seconds: dict[str, float] = {}
    code = 0
    for group in [g for g in GROUPS if g in args.only.split(",")]:
        begun = time.monotonic()
        print(f"bench: {group} ...", file=sys.stderr, flush=True)
        try:
            found = measure(group, GROUPS[group], quick, args.data_root)
        except KeyboardInterrupt:
            figures.append(not_measured(group, "failed", "interrupted (Ctrl-C)"))
            code = 130
            break
        finally:
            seconds[group] = round(time.monotonic() - begun, 1)
        figures += found
        if any(f.outcome == "failed" for f in found):
            code = 1
    report(figures, {**machine(), "mode": "quick" if quick else "full",
                     "seconds": round(time.monotonic() - started, 1), "group_seconds": seconds,
                     "data_root": str(args.data_root) if args.data_root else None}, args.json)
    return code


def report(figures: list[Figure], info: dict[str, object], json_path: Path | None) -> None:
    """The table on stdout and every figure, with the machine, as JSON."""
    print(f"machine: {info['cores']} cores, {info['memory_gib']} GiB, Python {info['python']}; "
          f"{info['mode']} run in {info['seconds']:.0f} s")
    print(table(figures))
    out = json_path or Path("runs") / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": info, "figures": [f.as_dict() for f in figures]},
                              indent=1))
    print(f"figures: {out}")


if __name__ == "__main__":
    sys.exit(main())
