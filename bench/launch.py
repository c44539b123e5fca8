"""The suite's mesh runs: `dfl-launch` as a user runs it, and what a run says of its own speed.

Each group that measures a mesh starts the real launcher (`python -m launcher.cli` from the
repository root, so an un-installed checkout works) and reads the run's own `summary.json`
rather than timing the launcher from outside, whose start-up is not the figure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def launch_command(options: Sequence[str], run_dir: Path) -> list[str]:
    """dfl-launch with `options`, writing to `run_dir`, without progress output or plots."""
    return [sys.executable, "-m", "launcher.cli", *options, "--out", str(run_dir), "--quiet",
            "--no-plots"]


def launch(options: Sequence[str], run_dir: Path, what: str,
           env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run dfl-launch to the end and return its summary; exit with the launcher's last words
    (`what` names the run) when it fails, since a figure of a failed run means nothing."""
    proc = subprocess.run(launch_command(options, run_dir), cwd=ROOT,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed: {proc.stderr[-2000:]}")
    return json.loads((run_dir / "summary.json").read_text())


def later_rounds(summary: Mapping[str, Any]) -> list[float]:
    """The nodes' mean wall seconds of each round after the first (`round_seconds`): the first
    round also waits for the slowest node's start, which is start-up, not a round."""
    return [s for r, s in summary["round_seconds"].items() if r != "0"]
