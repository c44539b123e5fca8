"""Per-cycle metrics: what a clustered protocol's evaluation reports after each cycle (its
protocol page's evaluation section; docs/run-directory.md#per-cycle-metrics).

One row per evaluated round in `cycles.jsonl`: every node's accuracy summarised (mean, min,
max, loss mean), per-cluster means, and, from the nodes' parameters, the global consensus gap
||Delta_hat|| = sqrt(sum_i ||theta_i - theta_bar||^2), the intra-cluster gaps ||Delta_s||, the
honest nodes' gap in a run with adversaries (launcher/results/honest.py), and the accuracy of the
network-average model theta_bar on the global test split. summary.json
gets cycles-to-threshold (the first round whose mean accuracy reaches each configured
threshold) and the plan's spectral report (lambda_2, lambda_min, SLEM and conductance of the
global matrix and of every cluster's Metropolis-Hastings matrix on its induced subgraph).

Why the launcher computes the gaps: they need every node's parameters at once. Nodes send them
only when `cycle_metrics.params_every` > 0, as `params` records on the metrics channel to the
collector: control traffic that never crosses the mesh, so the training ledgers and the
virtual clock cannot see it; its size is reported apart (`cycle_params_bytes`). For a big
model, 0 (the default) sends nothing and k sends every k-th round only. The collector holds at
most the rounds still incomplete, as float32, and drops them once the row is written.

Clusters: a protocol that groups nodes names the metrics key holding each node's group
(`ProtocolDeclaration.cycle_groups`); a node reporting it is grouped by it, otherwise the whole
network is one group. The parameters are those of the plan's classification model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dfl_node.plan import RunPlan
from dfl_node.runner.record_sink import params_due
from dfl_node.settings.cycle_metrics import CycleMetricsSettings
from launcher.results.consensus import consensus_gap
from launcher.results.honest import honest_clients
from protocols.registry import protocol_spec
from topologies.measures import exact_conductance, slem, sweep_conductance
from topologies.mixing import WEIGHTS, induced, lazy

if TYPE_CHECKING:
    from launcher.results.reference_model import ReferenceModel

EXACT_CONDUCTANCE_MAX = 14  # subsets enumerated up to this size; a Fiedler sweep above


def cycle_section(section: Mapping[str, Any]) -> CycleMetricsSettings:
    """The plan's `cycle_metrics` section: the run config's, thresholds in ascending order."""
    settings = CycleMetricsSettings.model_validate(section)
    return settings.model_copy(update={"thresholds": tuple(sorted(settings.thresholds))})


@dataclass
class Pending:
    """One round's records until every client has reported."""

    metrics: dict[int, dict[str, Any]]
    params: dict[int, dict[str, np.ndarray]]


class CycleMetrics:
    def __init__(self, plan: RunPlan, run_dir: Path) -> None:
        self.plan = plan
        self.section = plan.cycle_metrics
        self.group_key = protocol_spec(plan.protocol).cycle_groups
        self.path = run_dir / "cycles.jsonl"
        # rows already in the file: a resumed run's rounds before it stopped
        self.rows: list[dict[str, Any]] = [json.loads(line) for line in (
            self.path.read_text().splitlines() if self.path.is_file() else [])]
        self.params_bytes = 0
        self._pending: dict[int, Pending] = {}
        self._reference: ReferenceModel | None = None
        if self.section.params_every > 0:
            from launcher.results.reference_model import ReferenceModel  # torch: see its doc

            self._reference = ReferenceModel(plan)

    @classmethod
    def for_plan(cls, plan: RunPlan, run_dir: Path) -> CycleMetrics | None:
        """Only runs that ask for them (parameters or thresholds) get per-cycle metrics."""
        if not plan.cycle_metrics.wanted:
            return None
        return cls(plan, run_dir)

    def wants_params(self, round_: int) -> bool:
        plan = self.plan
        return params_due(self.section.params_every, plan.eval_every, plan.rounds, round_)

    def on_metrics(self, record: Mapping[str, Any]) -> None:
        if record["node"] in self.plan.clients and isinstance(record.get("round"), int):
            self._slot(record["round"]).metrics[record["node"]] = dict(record)
            self._complete(record["round"])

    def on_params(self, record: Mapping[str, Any], size: int) -> bool:
        """Take a `params` record; False (and nothing kept) if it is not one this run expects."""
        round_, node = record.get("round"), record["node"]
        tensors = self._checked(record.get("tensors"))
        if (tensors is None or not isinstance(round_, int) or node not in self.plan.clients
                or not self.wants_params(round_)):
            return False
        self.params_bytes += size
        self._slot(round_).params[node] = tensors
        self._complete(round_)
        return True

    def _checked(self, raw: Any) -> dict[str, np.ndarray] | None:
        """Names and byte sizes exactly those of the reference model's float tensors."""
        if self._reference is None or not isinstance(raw, dict):
            return None
        layout = self._reference.layout()
        if set(raw) != set(layout) or not all(
                isinstance(raw[n], bytes) and len(raw[n]) == 4 * math.prod(s)
                for n, s in layout.items()):
            return None
        return {n: np.frombuffer(raw[n], dtype="<f4").reshape(s) for n, s in layout.items()}

    def _slot(self, round_: int) -> Pending:
        return self._pending.setdefault(round_, Pending({}, {}))

    def _complete(self, round_: int) -> None:
        slot = self._pending[round_]
        clients = set(self.plan.clients)
        if set(slot.metrics) != clients:
            return
        if self.wants_params(round_) and set(slot.params) != clients:
            return
        row = cycle_row(round_, slot, self.plan.clients, self.group_key)
        if slot.params:
            row.update(self._model_figures(slot, groups_of(slot.metrics, self.group_key)))
        del self._pending[round_]
        self.rows.append(row)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(row, sort_keys=True) + "\n")

    def _model_figures(self, slot: Pending, groups: dict[str, list[int]]) -> dict[str, Any]:
        """Consensus gaps and the network-average model's accuracy (float64 sums)."""
        ids = sorted(slot.params)
        names = list(slot.params[ids[0]])
        gaps = {label: consensus_gap(slot.params, members, names)
                for label, members in [("all", ids), *groups.items()]}
        out: dict[str, Any] = {"consensus_gap": gaps.pop("all"),
                               "cluster_gaps": gaps if len(groups) > 1 else {}}
        if self.plan.adversaries:  # the honest nodes' own (launcher/results/honest.py)
            out["honest_consensus_distance"] = consensus_gap(
                slot.params, honest_clients(self.plan), names)
        mean = {n: np.asarray(np.mean([slot.params[i][n] for i in ids], axis=0,
                                      dtype=np.float64)) for n in names}
        scored = None if self._reference is None else self._reference.accuracy(mean)
        if scored is not None:
            out.update(avg_model_accuracy=scored[0], avg_model_loss=scored[1])
        return out

    def summary_keys(self) -> dict[str, Any]:
        """summary.json keys: cycles to each threshold, the spectral report, the last row."""
        last = self.rows[-1] if self.rows else {}
        groups = last.get("clusters", {})
        return {
            "cycles_to_threshold": cycles_to_threshold(self.rows, self.section.thresholds),
            "spectral": spectral_report(self.plan, {c: g["members"] for c, g in groups.items()}),
            "cycle_params_bytes": self.params_bytes,
            **{k: last[k] for k in ("consensus_gap", "avg_model_accuracy") if k in last},
        }


def groups_of(metrics: Mapping[int, Mapping[str, Any]], key: str | None) -> dict[str, list[int]]:
    """Node ids per reported group under `key` (one group "0" of every node when none is
    reported or the protocol has no groups)."""
    out: dict[str, list[int]] = {}
    for node in sorted(metrics):
        group = metrics[node].get(key, 0) if key is not None else 0
        out.setdefault(str(group), []).append(node)
    return out


def cycle_row(round_: int, slot: Pending, clients: list[int],
              group_key: str | None) -> dict[str, Any]:
    accs = [float(slot.metrics[i]["accuracy"]) for i in clients]
    losses = [float(slot.metrics[i]["loss"]) for i in clients]
    clusters = {
        label: {"members": members, "size": len(members),
                "accuracy_mean": float(np.mean([slot.metrics[i]["accuracy"] for i in members]))}
        for label, members in groups_of(slot.metrics, group_key).items()}
    return {"round": round_, "accuracy_mean": float(np.mean(accs)),
            "accuracy_min": min(accs), "accuracy_max": max(accs),
            "loss_mean": float(np.mean(losses)),
            "accuracies": {str(i): a for i, a in zip(clients, accs, strict=True)},
            "clusters": clusters}


def cycles_to_threshold(rows: list[dict[str, Any]],
                        thresholds: Sequence[float]) -> dict[str, int | None]:
    """The first round whose mean accuracy over nodes is >= each threshold (None: never)."""
    ordered = sorted(rows, key=lambda row: row["round"])
    return {f"{t:g}": next((row["round"] for row in ordered if row["accuracy_mean"] >= t), None)
            for t in thresholds}


def spectral_report(plan: RunPlan, clusters: Mapping[str, list[int]]) -> dict[str, Any]:
    """lambda_2, lambda_min, SLEM and conductance of the plan's global matrix and of each
    cluster's matrix (the plan's scheme on the cluster's induced subgraph); none for a directed
    or time-varying topology, which has no one matrix (its weights are per round)."""
    if plan.round_graphs is not None:
        return {}
    pos = {node: k for k, node in enumerate(plan.ids)}
    w = np.zeros((len(pos), len(pos)))
    adj = np.zeros_like(w)
    for i, j, value in plan.weights:
        w[pos[i], pos[j]] = value
    for u, v in plan.edges():
        adj[pos[u], pos[v]] = adj[pos[v], pos[u]] = 1.0
    report: dict[str, Any] = {"global": matrix_figures(w)}
    if len(clusters) > 1:
        base = plan.mixing.removeprefix("lazy-")
        report["clusters"] = {}
        for label, members in sorted(clusters.items()):
            sub = induced(adj, [pos[i] for i in members])
            cw = WEIGHTS[base](sub)
            figures = matrix_figures(lazy(cw) if base != plan.mixing else cw)
            report["clusters"][label] = {"size": len(members), "edges": int(sub.sum() // 2),
                                         **figures}
    return report


def matrix_figures(w: np.ndarray) -> dict[str, Any]:
    eig = np.linalg.eigvalsh(w)
    n = len(w)
    exact = n <= EXACT_CONDUCTANCE_MAX
    conductance = (exact_conductance(w) if exact else sweep_conductance(w)) if n > 1 else 0.0
    return {"lambda_2": float(eig[-2]) if n > 1 else 0.0, "lambda_min": float(eig[0]),
            "slem": slem(w), "spectral_gap": 1.0 - float(eig[-2]) if n > 1 else 1.0,
            "conductance": conductance, "conductance_method": "exact" if exact else "sweep"}
