"""Run-level keys of a DSC run, from every node's final report (summary.json).

A node knows only its own row of W (and its policies and task metrics), so what needs the whole
network is put together here, in the launcher: W per round from the rows, its rho (the rho that
sets J*, Eq. 41), row sums and N v (the scaling of column-stochastic mixing,
docs/protocols/dsc.md#a1), how many distinct binary policies the nodes hold (all equal would
make dsc FedAvg, docs/protocols/dsc.md#a4), and
Delta_all (Eq. 42-44) against the no-aggregation run: the `delta_baseline` run directory, or the
run itself for dsc-noagg (whose Delta is 0 by construction).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from protocols.dsc.delta import delta_report
from protocols.dsc.mixing_weights import perron_vector, subdominant_modulus
from protocols.sdk import RunPlan

TaskMetrics = dict[int, dict[str, dict[str, float]]]


def mixing_matrices(plan: RunPlan, reports: Mapping[int, Mapping[str, Any]]) -> list[np.ndarray]:
    """W of every round, row i from node i's report (ids are the plan's client order)."""
    ids = plan.clients
    if sorted(reports) != ids:  # a failed run: some rows are missing
        return []
    rounds = min((len(rep.get("rows", [])) for rep in reports.values()), default=0)
    out = []
    for r in range(rounds):
        w = np.zeros((len(ids), len(ids)))
        for a, i in enumerate(ids):
            for n, value in reports[i]["rows"][r].items():
                w[a, ids.index(int(n))] = value
        out.append(w)
    return out


def matrix_keys(ws: list[np.ndarray]) -> dict[str, Any]:
    if not ws:
        return {}
    rhos = [subdominant_modulus(w) for w in ws]
    last = ws[-1]
    return {"rho": rhos[-1], "rho_mean": float(np.mean(rhos)), "rho_per_round": rhos,
            "row_sums": last.sum(axis=1).tolist(), "column_sums": last.sum(axis=0).tolist(),
            "perron_nv": (len(last) * perron_vector(last)).tolist(),
            "mixing_final": last.tolist()}


def load_task_metrics(run_dir: str) -> TaskMetrics:
    summary = json.loads((Path(run_dir) / "summary.json").read_text())
    return {int(n): m for n, m in summary.get("task_metrics", {}).items()}


def delta_keys(results: TaskMetrics, baseline: TaskMetrics) -> dict[str, Any]:
    """Delta_all, Delta_t and Delta_{i,t} in %; None (with the reason) when the baseline run
    does not hold the same clients and tasks."""
    same = sorted(baseline) == sorted(results) and all(
        sorted(baseline[n]) == sorted(results[n]) for n in results)
    if not same:
        return {"delta_all": None, "delta_note": "the baseline run's clients or tasks differ"}
    rep = delta_report(results, baseline)
    return {"delta_all": rep.delta_all, "delta_tasks": rep.per_task,
            "delta_clients": {str(n): d for n, d in rep.per_client.items()}}


def run_summary(plan: RunPlan, reports: Mapping[int, Mapping[str, Any]], is_reference: bool,
                baseline: str | None) -> dict[str, Any]:
    results = {n: dict(rep["task_metrics"]) for n, rep in sorted(reports.items())
               if rep.get("task_metrics")}
    policies = {n: rep.get("policies", {}) for n, rep in sorted(reports.items())}
    distinct = {tuple(u) for pol in policies.values() for u in pol.values()}
    out: dict[str, Any] = {
        "task_metrics": {str(n): m for n, m in results.items()},
        "portfolios": {str(n): rep.get("tasks", []) for n, rep in sorted(reports.items())},
        "policies": {str(n): p for n, p in policies.items()},
        "distinct_policies": len(distinct),
        **matrix_keys(mixing_matrices(plan, reports)),
    }
    if results and (is_reference or baseline):
        out |= delta_keys(results, results if is_reference else load_task_metrics(str(baseline)))
    return out
