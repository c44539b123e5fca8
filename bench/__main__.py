"""`python -m bench`: the performance suite, one table of figures, each beside its reference.

    python -m bench [--quick | --full] [--only transport,overhead,...] [--json FILE]

`--quick` (the default) fits in 15 minutes on a 2-core machine; `--full` takes more repetitions
and larger meshes. Every figure with a reference is a ratio of two things measured in the same
run (bench/figures.py), because absolute times on a shared machine are noise. The table goes to
stdout with the machine's cores and memory, and the figures to JSON (default
runs/bench-<time>.json). The reproduction scripts (bench/reproduce_*.py) are not part of it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench import compute, overhead, scale, transport, wire_efficiency
from bench.figures import Figure, table

GROUPS: dict[str, Callable[[bool], list[Figure]]] = {
    "transport": transport.figures, "overhead": overhead.figures, "scale": scale.figures,
    "compute": compute.figures, "wire_efficiency": wire_efficiency.figures}


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
    parser.add_argument("--json", type=Path, default=None,
                        help="where the figures go (default runs/bench-<time>.json)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only.split(",")) - set(GROUPS))
    if unknown:
        parser.exit(2, f"python -m bench: --only: unknown group(s) {', '.join(unknown)}; "
                       f"known: {', '.join(GROUPS)}\n")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    quick = not args.full
    started = time.monotonic()
    figures: list[Figure] = []
    seconds: dict[str, float] = {}
    for group in [g for g in GROUPS if g in args.only.split(",")]:
        begun = time.monotonic()
        print(f"bench: {group} ...", file=sys.stderr, flush=True)
        figures += GROUPS[group](quick)
        seconds[group] = round(time.monotonic() - begun, 1)
    info = {**machine(), "mode": "quick" if quick else "full",
            "seconds": round(time.monotonic() - started, 1), "group_seconds": seconds}
    print(f"machine: {info['cores']} cores, {info['memory_gib']} GiB, Python {info['python']}; "
          f"{info['mode']} run in {info['seconds']:.0f} s")
    print(table(figures))
    out = args.json or Path("runs") / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": info, "figures": [f.as_dict() for f in figures]},
                              indent=1))
    print(f"figures: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
