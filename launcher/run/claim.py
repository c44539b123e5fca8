"""Whose a directory is: a launch takes a run directory only when it is new, empty, or its own.

The directory `--out` names may hold anything of the user's. A new run takes it when it is
absent or empty, or when it is a run directory of the very inputs asked for now (the same
`inputs.json`: a rerun, whose files are its own to replace). Anything else is refused before
any file is written (exit 2), unless `--overwrite` says the run may replace the run files
there; even then only the run files go (launcher/run/directory.py), and every other file stays
where it was. A path that is not a directory, or a directory this process cannot write, is
refused likewise.

The checks run twice: once before the plan is resolved, without touching anything, so a
refused directory costs the user no wait and a bad input leaves no directory behind; then again
under the directory's lock (launcher/run/lock.py), since another launcher may have changed the
directory in between.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from launcher.run import directory
from launcher.run.lock import RunLock, lock_made
from launcher.run.resume import record_inputs, recorded_inputs

SHOWN = 3  # entries a refusal names


def same_inputs(recorded: dict[str, Any] | None, req: RunSpec) -> bool:
    """Whether a run directory's recorded inputs are what `req` asks for. Only what a run is
    asked is compared: a Slurm run records beside it what its job asked Slurm for
    (launcher/slurm/submit.py), which changes nothing it computes."""
    asked = given(json.loads(json.dumps(req.recorded())))
    return recorded is not None and {key: given(recorded).get(key) for key in asked} == asked


def given(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs without the options left unset: an option not given is its default whether
    the run was recorded before or after the option existed (`on_corrupt`, added later)."""
    options = inputs.get("options")
    if not isinstance(options, dict):
        return inputs
    return {**inputs, "options": {k: v for k, v in options.items() if v is not None}}


def check_new(run_dir: Path, req: RunSpec, overwrite: bool) -> None:
    """Refuse (LaunchError) a `run_dir` a new run of `req` may not take; touches nothing."""
    if run_dir.exists() and not run_dir.is_dir():
        raise LaunchError(f"--out {run_dir}: not a directory")
    held = directory.entries(run_dir) if run_dir.is_dir() else []
    if not held or overwrite:
        return
    recorded = recorded_inputs(run_dir)
    if same_inputs(recorded, req):
        return
    shown = ", ".join(held[:SHOWN]) + (f" and {len(held) - SHOWN} more" if len(held) > SHOWN
                                       else "")
    what = ("holds a run of other inputs (inputs.json); --resume it," if recorded is not None
            else f"is not empty ({shown}) and not a run directory of these inputs;")
    raise LaunchError(f"--out {run_dir}: {what} choose another --out, or --overwrite to "
                      "replace its run files (nothing else is deleted)")


def claim_new(run_dir: Path, req: RunSpec, overwrite: bool) -> RunLock:
    """Make `run_dir` if need be and lock it for a new run of `req`, checked again under the
    lock; nothing in it is deleted yet (`start_fresh`, once the run is sure to start)."""
    check_new(run_dir, req, overwrite)
    lock = lock_made(run_dir, "--out")
    try:
        check_new(run_dir, req, overwrite)
    except BaseException:
        lock.release()
        raise
    return lock


@contextmanager
def writing(run_dir: Path) -> Iterator[None]:
    """The run directory's set-up, before any node starts: a directory that refuses it is one
    that cannot hold a run (exit 2, one line), and what a refused write left half-way (a
    metrics.jsonl being cut for a resume) is deleted."""
    try:
        yield
    except OSError as exc:
        directory.remove_temporaries(run_dir)
        raise LaunchError(f"{run_dir}: cannot write the run directory: "
                          f"{exc.strerror or exc}") from None


def start_fresh(run_dir: Path, lock: RunLock, req: RunSpec) -> None:
    """A new run in the claimed `run_dir`: the previous run's files deleted (none other), so no
    old checkpoint is resumed from and no old row or summary mixes in, and the inputs recorded
    for a later `--resume` (an OSError is the caller's: `writing`)."""
    lock.mark()
    directory.remove_run_files(run_dir)
    record_inputs(run_dir, req)


def finished(run_dir: Path) -> bool:
    """Whether `run_dir` holds a run that ended well (its summary says `ok`)."""
    try:
        return json.loads((run_dir / "summary.json").read_text()).get("status") == "ok"
    except (OSError, ValueError, AttributeError):
        return False
