"""Finding and reading the run directories `dfl-report` is pointed at.

A path is a run directory (it holds `summary.json`) or a folder above run directories, such as
the `--out` of `dfl-launch --seeds`, whose `seed-<s>/` runs are all taken. What is read: the
resolved `config.yaml` (grouping), `summary.json` (the tables) and `metrics.jsonl` (the curves).
Unreadable input is a LaunchError naming the file: one line, exit 2.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from launcher.errors import LaunchError


@dataclass(frozen=True)
class CurvePoint:
    """One evaluation of a run, summarised over its clients."""

    round: int
    avg_accuracy: float
    worst_accuracy: float
    bits_per_client: float  # cumulative formula bits per client before this evaluation


@dataclass(frozen=True)
class Run:
    path: Path
    config: dict[str, Any]
    summary: dict[str, Any]
    curve: list[CurvePoint]

    @property
    def seed(self) -> int:
        return int(self.summary["seed"])

    @property
    def protocol(self) -> str:
        return str(self.summary["protocol"])


def find_run_dirs(paths: list[Path]) -> list[Path]:
    """Every run directory at or below the given paths, each once, in path order."""
    found: dict[Path, None] = {}
    for path in paths:
        if not path.is_dir():
            raise LaunchError(f"{path}: no such directory")
        runs = [path] if (path / "summary.json").is_file() else sorted(
            p.parent for p in path.rglob("summary.json"))
        if not runs:
            raise LaunchError(f"{path}: no summary.json in it or below (not a run directory)")
        found.update((run.resolve(), None) for run in runs)
    return list(found)


def read_json(path: Path) -> dict[str, Any]:
    return read_mapping(path, json.loads, json.JSONDecodeError, "a JSON object")


def read_config(path: Path) -> dict[str, Any]:
    return read_mapping(path, yaml.safe_load, yaml.YAMLError, "a mapping")


def read_mapping(path: Path, parse: Callable[[str], Any], syntax: type[Exception],
                 kind: str) -> dict[str, Any]:
    """A run file that must hold a mapping; any way it cannot is one user-error line."""
    try:
        data = parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, syntax) as exc:
        raise LaunchError(f"{path}: unreadable ({exc})") from exc
    if not isinstance(data, dict):
        raise LaunchError(f"{path}: not {kind}")
    return data


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise LaunchError(f"{path}: line {number}: not JSON ({exc.msg})") from exc
    return rows


def build_curve(summary: dict[str, Any], rows: list[dict[str, Any]]) -> list[CurvePoint]:
    """Average and worst client accuracy per evaluated round, against the formula bits per
    client spent in the rounds before it (summary `formula.per_round` is 0-based, metrics
    rounds count completed rounds)."""
    clients = {node["id"] for node in summary.get("nodes", [])}
    per_round = summary.get("formula", {}).get("per_round", {})
    spent = [sum(per_round.get(str(t), {}).values()) for t in range(int(summary["rounds"]))]
    by_round: dict[int, list[float]] = {}
    for row in rows:
        if row.get("node") in clients and isinstance(row.get("accuracy"), int | float):
            by_round.setdefault(int(row["round"]), []).append(float(row["accuracy"]))
    return [CurvePoint(r, sum(accs) / len(accs), min(accs),
                       sum(spent[:r]) / max(len(clients), 1))
            for r, accs in sorted(by_round.items())]


def load_run(path: Path) -> Run:
    summary = read_json(path / "summary.json")
    missing = [key for key in ("protocol", "seed", "rounds") if key not in summary]
    if missing:
        raise LaunchError(f"{path / 'summary.json'}: missing {', '.join(missing)}")
    if not (path / "config.yaml").is_file():
        raise LaunchError(f"{path}: no config.yaml (not a run directory)")
    config = read_config(path / "config.yaml")
    return Run(path, config, summary, build_curve(summary, read_metrics(path / "metrics.jsonl")))


def load_runs(paths: list[Path]) -> list[Run]:
    return [load_run(path) for path in find_run_dirs(paths)]
