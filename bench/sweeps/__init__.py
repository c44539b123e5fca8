"""The reproduction scripts' sweeps: each script is a sweep (docs/sweeps.md) plus its claim
checks. This runs a script's sweep and hands its finished runs back by what they are.

A sweep skips finished runs and resumes interrupted ones, so a script run again after Ctrl-C
(or a failure fixed) finishes the rest. The sweep's `dfl-report` tables go to OUT/report.md;
the script prints its own tables, so the report is not printed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from launcher.api.result import RunResult
from launcher.errors import LaunchError
from launcher.run.finish import EXIT_INTERRUPTED
from launcher.sweep.grid import Point
from launcher.sweep.runner import REPORT_FILE, SweepResult, finished, run_sweep
from launcher.sweep.spec import SweepSpec, load_spec

HERE = Path(__file__).resolve().parent


def load(name: str) -> SweepSpec:
    """A sweep file shipped here (`bench/sweeps/<name>.yaml`), validated."""
    try:
        return load_spec(HERE / f"{name}.yaml")
    except LaunchError as exc:
        raise SystemExit(f"{name}: {exc}") from None


def run(spec: SweepSpec, what: str) -> SweepResult:
    """Run the sweep's unfinished runs; exit with one line unless every run finished: bad input
    (2), interrupted (130: the same command again resumes), a failed run (1, the first named)."""
    try:
        result = run_sweep(spec, on_report=lambda _: None)
    except LaunchError as exc:
        print(f"{what}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if result.interrupted:
        print(f"{what}: interrupted; the same command again resumes the sweep",
              file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED)
    failed = [p for p in result.points if not finished(p.run_dir)]
    if failed:
        raise SystemExit(f"{what}: {len(failed)} of {len(result.points)} runs failed, the "
                         f"first {failed[0].label}: {why(failed[0])} (see {failed[0].run_dir})")
    print(f"{what}: {len(result.points)} runs, {result.skipped} of them finished before; "
          f"dfl-report tables: {result.out / REPORT_FILE}", file=sys.stderr, flush=True)
    return result


def why(point: Point) -> str:
    """A failed run's reason, from its summary when it wrote one."""
    if not (point.run_dir / "summary.json").is_file():
        return "no summary"
    raw = RunResult(point.run_dir).raw
    reasons = [f"node {f.get('node')}: {f.get('reason')}" for f in raw.get("failures") or []]
    return f"status {raw.get('status')}" + "".join(f"; {r}" for r in reasons[:1])


def summaries(result: SweepResult) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Each run's summary (with `_dir`, its run directory) by (variant, topology, seed); the
    topology as its file's stem, as the run directories name it."""
    return {(p.variant.name, Path(p.topology).stem, p.seed):
            {**RunResult(p.run_dir).raw, "_dir": str(p.run_dir)} for p in result.points}
