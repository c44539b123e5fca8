"""The run directory (docs/run-directory.md): making it, writing a file into it whole, and the
files a run writes there, by name: the one list of them.

A run directory is the user's: a launch may delete only what a run writes there, never a file
of the user's that happens to sit beside them (notes, a thesis in `checkpoints/`). So what a
run writes is spelt out as patterns relative to the directory, and both deleting a previous
run's files (a rerun of the same inputs, `--overwrite`) and tidying up after a fault (the
temporary files an interrupted write leaves) go through them. docs/run-directory.md lists the
same names; a run file not listed here would survive `--overwrite` and mix an old run's
results into a new one, so a new kind of run file is added here and there together.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

LOCK = "run.lock"  # launcher/run/lock.py; never deleted (see there)
TOP_FILES = ("config.yaml", "plan.json", "inputs.json", "metrics.jsonl", "cycles.jsonl",
             "summary.json", "ledger.json", "schedule.json", "links.json", "prephase.json",
             "clustering.json", "job.sh", "slurm-*.out")
NESTED_FILES = ("final/node-*.safetensors", "logs/node-*.log", "plots/*.png",
                "profile/node-*.prof", "keys/*.key", "keys/*.key_secret",
                "records/node-*.jsonl", "steps/node-*.exit", "steps/plan.ready",
                "checkpoints/resume.json", "checkpoints/node-*/round-*.safetensors")
# What a write cut short leaves: the atomic writers' temporary names (directory.write_json and
# resume.py's `<stem>.tmp`, a checkpoint's `.round-<k>.safetensors.<pid>.tmp`).
TEMPORARY = (*(f"{Path(name).stem}.tmp" for name in TOP_FILES if "*" not in name),
             "checkpoints/node-*/.round-*.safetensors.*.tmp")
# Folders a run makes, deepest first: removed once the run files are gone, if nothing is left.
FOLDERS = ("checkpoints/node-*", "checkpoints", "final", "logs", "plots", "profile", "keys",
           "records", "steps")


def matching(run_dir: Path, patterns: tuple[str, ...]) -> Iterator[Path]:
    """The files of `run_dir` that match `patterns`, none reached through a symbolic link (a
    `logs` that links elsewhere is not the run's folder)."""
    for pattern in patterns:
        yield from (path for path in sorted(run_dir.glob(pattern))
                    if path.is_file() and not linked(run_dir, path.parent))


def linked(run_dir: Path, folder: Path) -> bool:
    """Whether `folder` (in `run_dir`) is, or lies in, a symbolic link."""
    inside = folder.relative_to(run_dir)
    return any((run_dir / up).is_symlink() for up in (inside, *inside.parents)
               if up != Path("."))


def remove_run_files(run_dir: Path) -> None:
    """Delete every run file and temporary file in `run_dir` and the run's folders left empty;
    anything else stays. An OSError is the caller's (the directory cannot be written)."""
    for path in matching(run_dir, (*TOP_FILES, *NESTED_FILES, *TEMPORARY)):
        path.unlink()
    for pattern in FOLDERS:
        for folder in sorted(run_dir.glob(pattern)):
            if folder.is_dir() and not linked(run_dir, folder) and not any(folder.iterdir()):
                folder.rmdir()


def remove_temporaries(run_dir: Path) -> list[Path]:
    """Delete what interrupted writes left in `run_dir` (its writers are gone: the nodes are
    stopped); the files that could not be deleted."""
    stuck = []
    for path in matching(run_dir, TEMPORARY):
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            stuck.append(path)
    return stuck


def entries(run_dir: Path) -> list[str]:
    """What `run_dir` holds besides the lock file, by name ([] when it is empty or absent)."""
    try:
        return sorted(p.name for p in run_dir.iterdir() if p.name != LOCK)
    except FileNotFoundError:
        return []


def default_run_dir(protocol: str, topology: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stamp}-{protocol}-{topology}"


def prepare(run_dir: Path, config: dict[str, Any]) -> None:
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    (run_dir / "final").mkdir(exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=True))


def write_json(path: Path, data: Any) -> None:
    """`data` as `path`, whole or not at all: written beside it, then renamed; a write the
    file system refuses leaves no temporary file."""
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
