"""A finished run directory, read into what its figures draw.

Everything comes from the files the run wrote (metrics.jsonl, summary.json, plan.json,
ledger.json, prephase.json), never from the live collector, so a run directory copied from
another machine plots the same way.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dfl_node.plan import RunPlan
from protocols.describe import MultiTask, Score
from protocols.registry import protocol_spec

Row = dict[str, Any]


@dataclass(frozen=True)
class Band:
    """One metric over the clients, per evaluated round: mean and the per-node range."""

    rounds: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass(frozen=True)
class RunFiles:
    """What the figures read of one run directory (files a run may lack read as empty)."""

    rows: list[Row]
    summary: dict[str, Any]
    plan: RunPlan
    ledger: dict[str, Any]
    prephase: dict[str, Any]

    @property
    def score(self) -> Score:
        """What the metrics' `accuracy` holds, as the protocol names it."""
        return protocol_spec(self.plan.protocol).score

    @property
    def multitask(self) -> MultiTask | None:
        """Set for protocols judged by per-task metrics and Delta_all, not one accuracy."""
        return protocol_spec(self.plan.protocol).multitask

    @property
    def adversaries(self) -> list[int]:
        """The plan's adversarial nodes, in id order (none in most runs)."""
        return sorted(self.plan.adversaries)

    @property
    def honest_rows(self) -> list[Row]:
        """The metrics rows of the honest nodes: every row in a run without adversaries."""
        if not self.plan.adversaries:
            return self.rows
        return [row for row in self.rows if row["node"] not in self.plan.adversaries]


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def load_run(run_dir: Path) -> RunFiles:
    metrics = run_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return RunFiles(rows, read_json(run_dir / "summary.json"),
                    RunPlan.load(run_dir / "plan.json"), read_json(run_dir / "ledger.json"),
                    read_json(run_dir / "prephase.json"))


def band(rows: list[Row], value: Callable[[Row], float | None]) -> Band:
    """Per round, over the rows that have a value: mean, min and max."""
    by_round: dict[int, list[float]] = defaultdict(list)
    for row in rows:
        v = value(row)
        if v is not None:
            by_round[int(row["round"])].append(float(v))
    rounds = sorted(by_round)
    stats = np.array([[np.mean(by_round[r]), min(by_round[r]), max(by_round[r])]
                      for r in rounds]).reshape(-1, 3)
    return Band(np.array(rounds), stats[:, 0], stats[:, 1], stats[:, 2])


def key(name: str) -> Callable[[Row], float | None]:
    return lambda row: row.get(name)


def virtual_seconds(run: RunFiles, rounds: np.ndarray) -> np.ndarray:
    """The mesh's virtual clock at each evaluated round (its slowest node)."""
    clock = band(run.rows, key("virtual_seconds"))
    at = dict(zip(clock.rounds.tolist(), clock.high.tolist(), strict=True))
    return np.array([at[int(r)] for r in rounds])


def bits_per_client(run: RunFiles, rounds: np.ndarray) -> np.ndarray | None:
    """Formula bits per client sent by the end of each evaluated round (round r has run
    rounds 0..r-1); None when the protocol charged none."""
    per_round = run.summary.get("formula", {}).get("per_round", {})
    if not per_round:
        return None
    totals = np.zeros(max(int(r) for r in rounds) if len(rounds) else 0)
    for r, parts in per_round.items():
        if int(r) < len(totals):
            totals[int(r)] = sum(parts.values())
    cumulative = np.cumsum(totals) / max(len(run.plan.clients), 1)
    return cumulative[rounds - 1]


def final_scores(run: RunFiles) -> dict[int, float]:
    """Each client's last evaluation (its `accuracy`: the protocol's score)."""
    last: dict[int, Row] = {}
    for row in run.rows:
        if row.get("accuracy") is not None:
            last[row["node"]] = row
    return {n: float(r["accuracy"]) for n, r in sorted(last.items())}


def positions(run: RunFiles) -> dict[int, tuple[float, float]] | None:
    """The topology's own node positions when every node has one."""
    nodes = run.plan.topology.get("nodes", [])
    if nodes and all(len(n.get("position") or ()) >= 2 for n in nodes):
        return {int(n["id"]): (float(n["position"][0]), float(n["position"][1]))
                for n in nodes}
    return None


def clusters(run: RunFiles) -> dict[int, int]:
    """Each node's cluster, as a pre-phase coordinator that forms clusters records it
    (prephase.json `cluster_of`); empty for protocols without one."""
    return {int(n): int(c) for n, c in run.prephase.get("cluster_of", {}).items()}


def slots(run: RunFiles) -> dict[tuple[int, int], int]:
    """The TDMA slot of each directed link (sender, receiver); empty for sync schedules."""
    return {link: c for c, links in enumerate(run.plan.schedule.slots) for link in links}


def link_bytes(run: RunFiles) -> np.ndarray:
    """Data bytes (payload and framing) each node sent on each link, sender by receiver,
    indexed in sorted-id order; from each sender's own ledger."""
    ids = run.plan.ids
    index = {n: k for k, n in enumerate(ids)}
    matrix = np.zeros((len(ids), len(ids)))
    for node, entry in run.ledger.items():
        for link, cell in entry.get("per_link", {}).items():
            src, dst = (int(x) for x in link.split("->"))
            if src == int(node) and dst in index:
                matrix[index[src], index[dst]] = cell["payload_bytes"] + cell["framing_bytes"]
    return matrix


def task_metrics_at(rows: list[Row]) -> dict[int, dict[int, Any]]:
    """Multi-task runs: round -> node -> that evaluation's task metrics."""
    out: dict[int, dict[int, Any]] = defaultdict(dict)
    for row in rows:
        if row.get("task_metrics"):
            out[int(row["round"])][int(row["node"])] = row["task_metrics"]
    return out


def delta_by_round(run: RunFiles, multitask: MultiTask) -> tuple[np.ndarray, np.ndarray] | None:
    """Multi-task runs: Delta_all at every round both this run and its baseline evaluated (the
    run named by the hyper-parameter `multitask.baseline`); None without a readable baseline
    with the same clients and tasks."""
    baseline = run.plan.hyper.get(multitask.baseline)
    metrics = Path(str(baseline)) / "metrics.jsonl" if baseline else None
    if metrics is None or not metrics.exists():
        return None
    ours = task_metrics_at(run.rows)
    theirs = task_metrics_at([json.loads(line) for line in metrics.read_text().splitlines()
                              if line.strip()])
    rounds = [r for r in sorted(ours) if r in theirs and sorted(ours[r]) == sorted(theirs[r])]
    try:
        values = [multitask.delta_all(ours[r], theirs[r]) for r in rounds]
    except KeyError:  # a node's tasks differ between the runs
        return None
    return (np.array(rounds), np.array(values)) if rounds else None
