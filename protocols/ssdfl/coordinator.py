"""SSD-FL's one-time coordinator (Sec. V; docs/protocols/ssd-fl.md#pre-phase): reports in,
clusters and weight rows out.

Runs once, in the coordinator process, on the reports the runtime gathered (one per node). It
checks every report against the plan (exact names, dtypes and shapes; equal sample sizes, as
eq. 40 requires; the degree the plan gives the node; finite numbers), computes each edge's
eq. 40 term once, runs Algorithm 1 (`clustering.form_clusters`) and answers every node
with its cluster id, its row of A~ (Metropolis-Hastings on its cluster's induced subgraph) and
its row of A (the plan's global mixing matrix). prephase.json gets the choice, the per-cluster
spectral and heterogeneity figures and what each node reported (not its raw sample);
clustering.json gets the candidate table for S = 1..N.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from protocols.sdk import Coordination, RunPlan
from protocols.ssdfl.clustering import (
    Clustering,
    ClusteringResult,
    NodeInputs,
    check_overrides,
    cluster_matrix_of,
    config_record,
    form_clusters,
    heterogeneity_of,
)
from protocols.ssdfl.clustering_settings import ClusteringConfig, ClusteringSettings
from protocols.ssdfl.heterogeneity import edge_divergence
from protocols.ssdfl.optimizers import OptimizerConfig

REPORT_FIELDS = ("degree", "label_hist", "sample", "optimizer", "init_loss")


def clustering_config(plan: RunPlan, settings: ClusteringSettings, lr: float,
                      tau_a: int) -> ClusteringConfig:
    """Algorithm 1's inputs for the plan: `settings` resolved (eta, the plan's mixing), and
    `override_partition` turned from node ids into positions; ValueError (one line) when an
    override does not fit the plan's nodes. The launcher runs it too (`SSDFL_SPEC.check_plan`), so
    a bad override is exit 2 before any node starts."""
    ids = plan.ids
    cfg = ClusteringConfig.resolve(settings, lr, tau_a,
                                   lazy_mixing=plan.mixing.startswith("lazy-"))
    if cfg.override_partition is not None:
        pos = {node: k for k, node in enumerate(ids)}
        unknown = {i for c in cfg.override_partition for i in c} - set(pos)
        if unknown:
            raise ValueError(f"clustering.override_partition: unknown nodes {sorted(unknown)}")
        cfg = cfg.model_copy(update={"override_partition": tuple(
            tuple(pos[i] for i in c) for c in cfg.override_partition)})
    check_overrides(cfg, len(ids))
    return cfg


def coordinate_clusters(plan: RunPlan, reports: Mapping[int, Mapping[str, np.ndarray]],
                        cfg: ClusteringConfig) -> Coordination:
    """Every node's answer from every node's report, under the run's `clustering_config`."""
    ids = plan.ids
    adj = adjacency(plan)
    checked = [check_report(plan, i, reports[i]) for i in ids]
    check_shapes(checked)
    inputs = node_inputs(adj, checked)
    result = form_clusters(adj, inputs, cfg)
    intra = block_matrix(adj, result.partition, cfg.lazy_mixing)
    inter = global_matrix(plan)
    answers = {node: answer(k, result.partition, intra, inter, ids) for k, node in enumerate(ids)}
    record = prephase_record(ids, adj, result, inputs, cfg, checked)
    return Coordination(answers, record, {"clustering.json": clustering_record(ids, result, cfg)})


def adjacency(plan: RunPlan) -> np.ndarray:
    pos = {node: k for k, node in enumerate(plan.ids)}
    adj = np.zeros((len(pos), len(pos)))
    for u, v in plan.edges():
        adj[pos[u], pos[v]] = adj[pos[v], pos[u]] = 1.0
    return adj


def global_matrix(plan: RunPlan) -> np.ndarray:
    """A: the plan's mixing weights (the same floats every other protocol mixes with)."""
    pos = {node: k for k, node in enumerate(plan.ids)}
    w = np.zeros((len(pos), len(pos)))
    for i, j, value in plan.weights:
        w[pos[i], pos[j]] = value
    return w


def block_matrix(adj: np.ndarray, partition: Clustering, lazy_mixing: bool) -> np.ndarray:
    """A~: each cluster's own Metropolis-Hastings matrix, block-diagonal (eq. 1)."""
    w = np.zeros_like(adj)
    for members in partition:
        w[np.ix_(members, members)] = cluster_matrix_of(adj, members, lazy_mixing)
    return w


def check_report(plan: RunPlan, node: int, report: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """One node's report as plain values, or ValueError naming the node and the field."""
    if set(report) != set(REPORT_FIELDS):
        raise ValueError(f"node {node}: report fields {sorted(report)} are not {REPORT_FIELDS}")
    shapes = {"degree": ("int64", 0), "label_hist": ("float64", 1), "sample": ("float32", 2),
              "optimizer": ("float64", 1), "init_loss": ("float64", 0)}
    for name, (dtype, ndim) in shapes.items():
        array = report[name]
        if array.dtype.name != dtype or array.ndim != ndim:
            raise ValueError(f"node {node}: {name} must be {dtype} with {ndim} dims")
        if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
            raise ValueError(f"node {node}: {name} is not finite")
    if int(report["degree"]) != len(plan.neighbors(node)):
        raise ValueError(f"node {node}: reported degree {int(report['degree'])}, the plan says "
                         f"{len(plan.neighbors(node))}")
    hist = report["label_hist"]
    if np.any(hist < 0) or not math.isclose(float(hist.sum()), 1.0, abs_tol=1e-6):
        raise ValueError(f"node {node}: label_hist must be frequencies summing to 1")
    if report["optimizer"].shape != (3,):
        raise ValueError(f"node {node}: optimizer must be (type, mu, rho)")
    return {"degree": int(report["degree"]), "label_hist": hist, "sample": report["sample"],
            "optimizer": OptimizerConfig.from_array(report["optimizer"]),
            "init_loss": float(report["init_loss"])}


def check_shapes(checked: list[dict[str, Any]]) -> None:
    """Eq. 40 compares equal-size samples of equal features and equal-length histograms."""
    for name in ("label_hist", "sample"):
        shapes = {c[name].shape for c in checked}
        if len(shapes) != 1:
            raise ValueError(f"reports disagree on the shape of {name}: {sorted(shapes)}")


def node_inputs(adj: np.ndarray, checked: list[dict[str, Any]]) -> NodeInputs:
    edges = {(i, j): edge_divergence(checked[i]["label_hist"], checked[j]["label_hist"],
                                     checked[i]["sample"], checked[j]["sample"])
             for i, j in zip(*np.nonzero(np.triu(adj)), strict=True)}
    return NodeInputs(tuple(c["optimizer"] for c in checked),
                      tuple(c["init_loss"] for c in checked),
                      {(int(i), int(j)): t for (i, j), t in edges.items()})


def answer(k: int, partition: Clustering, intra: np.ndarray, inter: np.ndarray,
           ids: list[int]) -> dict[str, np.ndarray]:
    """Node k's cluster and rows, ascending by id whatever the order of the topology file's
    nodes (a node checks it: `ssdfl.weight_row`)."""
    cluster = next(c for c, members in enumerate(partition) if k in members)
    out = {"cluster": np.array(cluster, dtype=np.int64)}
    for regime, w in (("intra", intra), ("inter", inter)):
        cols = np.array(sorted(np.nonzero(w[k])[0], key=lambda c: ids[c]), dtype=np.int64)
        out[f"{regime}_ids"] = np.array([ids[c] for c in cols], dtype=np.int64)
        out[f"{regime}_w"] = w[k, cols].astype(np.float64)
    return out


def prephase_record(ids: list[int], adj: np.ndarray, result: ClusteringResult,
                    inputs: NodeInputs, cfg: ClusteringConfig,
                    checked: list[dict[str, Any]]) -> dict[str, Any]:
    clusters = [[ids[k] for k in members] for members in result.partition]
    cluster_of = {str(ids[k]): c for c, members in enumerate(result.partition) for k in members}
    return {
        "s_star": result.s_star, "source": result.source, "fallback": result.fallback,
        "clusters": clusters, "cluster_of": cluster_of,
        "cluster_report": [cluster_figures(adj, members, inputs, cfg)
                           for members in result.partition],
        "nodes": {str(ids[k]): {"degree": c["degree"], "init_loss": c["init_loss"],
                                "optimizer": optimizer_record(c["optimizer"]),
                                "label_hist": c["label_hist"].tolist()}
                  for k, c in enumerate(checked)},
    }


def optimizer_record(spec: OptimizerConfig) -> dict[str, Any]:
    return {"kind": spec.type, "mu": spec.mu, "rho": spec.rho}


def cluster_figures(adj: np.ndarray, members: tuple[int, ...], inputs: NodeInputs,
                    cfg: ClusteringConfig) -> dict[str, float]:
    """Spectral and heterogeneity figures of one cluster (docs/protocols/ssd-fl.md#evaluation)."""
    eig = np.linalg.eigvalsh(cluster_matrix_of(adj, members, cfg.lazy_mixing))
    het = heterogeneity_of(members, inputs, cfg)
    return {"size": len(members), "lambda_2": float(eig[-2]) if len(eig) > 1 else 0.0,
            "lambda_min": float(eig[0]), "beta_o": het.beta_o, "beta_d": het.beta_d,
            "alpha_o": het.alpha_o, "alpha_d": het.alpha_d, "alpha": het.alpha}


def clustering_record(ids: list[int], result: ClusteringResult,
                      cfg: ClusteringConfig) -> dict[str, Any]:
    """The candidate table of Algorithm 1 (S = 1..N) and the choice made from it."""
    rows = [{"S": c.S, "min_conductance": c.min_conductance, "phi_min": c.phi_min,
             "feasible": c.feasible, "H": c.H if math.isfinite(c.H) else None,
             "cluster_sizes": [len(m) for m in c.partition],
             "clusters": [[ids[k] for k in m] for m in c.partition]}
            for c in result.candidates]
    config = config_record(cfg)
    config["override_partition"] = None if cfg.override_partition is None else \
        [[ids[k] for k in m] for m in cfg.override_partition]
    return {"candidates": rows, "s_star": result.s_star, "source": result.source,
            "fallback": result.fallback, "config": config}
