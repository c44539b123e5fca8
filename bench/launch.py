"""The suite's mesh runs: `dfl-launch` as a user runs it, and what a run says of its own speed.

Each group that measures a mesh starts the real launcher (`python -m launcher.cli` from the
repository root, so an un-installed checkout works) and reads the run's own `summary.json`
rather than timing the launcher from outside, whose start-up is not the figure. A group that
runs on a real dataset first asks the launcher's own locator whether the data is there
(`require_data`), so a missing dataset costs seconds, not the minutes of the runs before it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dfl_config.errors import DflMeshError

ROOT = Path(__file__).resolve().parents[1]


class DataMissing(DflMeshError):
    """A group's dataset is not where dfl-launch would look: the message says what it needs."""


def require_data(dataset: str, data_root: Path | None) -> None:
    """Raise DataMissing, in the launcher's words (where it looked, how to pass the data), unless
    `dfl-launch --dataset <dataset> [--data-root <data_root>]` would find its files.

    The launcher's locator is imported here, not at the top: it imports torch, which groups
    without a dataset do not need."""
    from launcher.data.prepare import locate
    from launcher.errors import LaunchError

    try:
        locate(dataset, str(data_root) if data_root is not None else None)
    except LaunchError as exc:
        raise DataMissing(f"{exc} (python -m bench --data-root DIR passes DIR on)") from None


def launch_command(options: Sequence[str], run_dir: Path) -> list[str]:
    """dfl-launch with `options`, writing to `run_dir`, without progress output or plots."""
    return [sys.executable, "-m", "launcher.cli", *options, "--out", str(run_dir), "--quiet",
            "--no-plots"]


def launch(options: Sequence[str], run_dir: Path, what: str,
           env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run dfl-launch to the end and return its summary; exit when it fails, since a figure of a
    failed run means nothing: the first line names the run (`what`), its exit code and the
    launcher's last words, the lines after it the end of its stderr."""
    proc = subprocess.run(launch_command(options, run_dir), cwd=ROOT,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed (exit {proc.returncode}): {last_words(proc.stderr)}\n"
                         f"{proc.stderr[-2000:]}")
    return json.loads((run_dir / "summary.json").read_text())


def last_words(stderr: str) -> str:
    """The line that says why a run failed: the launcher's last line (its one-line error), or,
    after a Python traceback, the exception's first line, which its frames and chained
    details would otherwise bury."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    headers = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent")]
    after = lines[headers[-1] + 1:] if headers else []
    return next((line for line in after if not line[0].isspace()), lines[-1] if lines else "")


def later_rounds(summary: Mapping[str, Any]) -> list[float]:
    """The nodes' mean wall seconds of each round after the first (`round_seconds`): the first
    round also waits for the slowest node's start, which is start-up, not a round."""
    return [s for r, s in summary["round_seconds"].items() if r != "0"]
