"""SSD-FL end to end: the pre-phase over both transports, eqs. 11 and 18 against numpy, S = 1,
a device without in-cluster neighbours, and S* recomputed from clustering.json."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file

from dfl_node.learning.models import build_model
from dfl_node.learning.shards import load_node_data
from dfl_node.settings.data_section import DataSection
from tests.harness import assert_transports_identical, final_files, launch, launch_ok
from tests.test_dpsgd import softmax_grad

FAST = ("--dataset", "synthetic", "--partition", "iid", "--set", "model={name: mlp}",
        "--set", "local_steps=1", "--set", "sample_size=20")
LINE6 = """\
name: line6-opt
nodes:
  - {id: 0, optimizer: {type: sgd}}
  - {id: 1, optimizer: {type: prox, mu: 0.5}}
  - {id: 2, optimizer: {type: momentum, rho: 0.9}}
  - {id: 3, optimizer: {type: momentum, rho: 0.5}}
  - {id: 4, optimizer: {type: prox, mu: 0.3}}
  - {id: 5}
edges: [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [0, 2]]
"""
PENDANT = """\
name: pendant
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}]
edges: [[0, 1], [1, 2], [0, 2], [2, 3]]
"""


def topology(tmp_path: Path, text: str, name: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def read(run: Path, name: str) -> dict[str, Any]:
    return json.loads((run / name).read_text())


def recompute_s_star(table: dict[str, Any]) -> int:
    """Algorithm 1, line 12, from the file alone: eq. 37, the filter and the argmin."""
    cfg = table["config"]
    rows = table["candidates"]
    n = len(rows)
    best = None
    for row in rows:
        tau = cfg["tau_a"] if cfg["threshold_include_tau_a"] else 1
        phi_min = math.sqrt(2 * cfg["eta"] + 4 * cfg["eta"] * tau * cfg["B"]
                            * math.sqrt(n // row["S"]) / cfg["delta_tol"])
        assert row["phi_min"] == pytest.approx(phi_min)
        feasible = (row["min_conductance"] >= phi_min and row["H"] is not None
                    and min(row["cluster_sizes"]) >= cfg["min_cluster_size"])
        assert feasible == row["feasible"]
        if feasible and (best is None or row["H"] < best["H"]):
            best = row
    return 1 if best is None else best["S"]


def test_complete10_transports_identical_and_literal_s_star(tmp_path: Path) -> None:
    zmq_sum, _ = assert_transports_identical(tmp_path, "complete10", "ssd-fl", *FAST,
                                             "--rounds", "2")
    assert len({n["pid"] for n in zmq_sum["nodes"]}) == 10
    pre = {t: read(tmp_path / t, "prephase.json") for t in ("zmq", "inproc")}
    for doc in pre.values():
        doc.pop("plan_hashes")  # the runtime section (transport, ports) differs by design
    assert pre["zmq"] == pre["inproc"]
    assert read(tmp_path / "zmq", "clustering.json") == read(tmp_path / "inproc",
                                                             "clustering.json")
    table = read(tmp_path / "zmq", "clustering.json")
    assert [row["S"] for row in table["candidates"]] == list(range(1, 11))
    assert table["s_star"] == recompute_s_star(table) == pre["zmq"]["s_star"] == 4
    assert not table["fallback"]  # the paper says K_N gives S* = 1; the literal rule does not
    # pre-phase bytes are counted apart from training traffic, on both ends
    assert zmq_sum["prephase_bytes"] == pre["zmq"]["traffic"]["bytes"] > 10 * 20 * 32 * 4
    metrics = [json.loads(line) for line in
               (tmp_path / "zmq" / "metrics.jsonl").read_text().splitlines()]
    assert {m["cluster"] for m in metrics} == set(range(4))
    assert {m["iterations"] for m in metrics} == {4, 8}


@pytest.mark.slow
def test_er30_transports_identical(tmp_path: Path) -> None:
    assert_transports_identical(tmp_path, "er30", "ssd-fl", *FAST, "--rounds", "2")
    table = read(tmp_path / "zmq", "clustering.json")
    assert table["s_star"] == recompute_s_star(table) == 13


def cluster_mh(adj: np.ndarray, clusters: list[list[int]]) -> np.ndarray:
    """Metropolis-Hastings per cluster on its induced subgraph, written out independently."""
    n = len(adj)
    w = np.zeros((n, n))
    for members in clusters:
        sub = np.zeros((n, n))
        for i in members:
            for j in members:
                sub[i, j] = adj[i, j]
        deg = sub.sum(axis=1)
        for i in members:
            for j in members:
                if i != j and sub[i, j]:
                    w[i, j] = 1.0 / (1.0 + max(deg[i], deg[j]))
            w[i, i] = 1.0 - w[i].sum()
    return w


def test_one_cycle_matches_numpy_eqs_11_and_18(tmp_path: Path) -> None:
    """Full-batch linear model, float64 numpy: tau_a = 3 steps of eq. 11 with each device's own
    optimizer (eq. 10) inside clusters {0,1,2}, {3,4}, {5} (5 has no in-cluster neighbour),
    then tau_r = 2 steps of eq. 18 with the global MH matrix."""
    lr, tau_a, tau_r = 0.2, 3, 2
    clusters = [[0, 1, 2], [3, 4], [5]]
    run = tmp_path / "run"
    launch_ok(run, topology(tmp_path, LINE6, "line6"), "ssd-fl", "--transport", "inproc",
              "--rounds", "1", "--dataset", "synthetic", "--partition", "iid",
              "--set", "model={name: linear}", "--set", "batch_size=100000",
              "--set", f"lr={lr}", "--set", f"tau_a={tau_a}", "--set", f"tau_r={tau_r}",
              "--set", "local_steps=1", "--set", "optimizers=topology",
              "--set", f"hyper.clustering={{override_partition: {clusters}}}")
    plan = read(run, "plan.json")
    pre = read(run, "prephase.json")
    assert pre["clusters"] == clusters and pre["source"] == "override_partition"
    ids = [n["id"] for n in plan["nodes"]]
    n = len(ids)
    adj = np.zeros((n, n))
    for u, v in plan["topology"]["edges"]:
        adj[u, v] = adj[v, u] = 1
    intra = cluster_mh(adj, clusters)
    inter = cluster_mh(adj, [list(range(n))])
    mu = [pre["nodes"][str(i)]["optimizer"]["mu"] for i in ids]
    rho = [pre["nodes"][str(i)]["optimizer"]["rho"] for i in ids]
    assert mu == [0, 0.5, 0, 0, 0.3, 0] and rho == [0, 0, 0.9, 0.5, 0, 0]
    data = [load_node_data(DataSection.model_validate(plan["data"]), ids, i) for i in ids]
    model = build_model({"name": "linear"}, (32,), 10, plan["seed"])
    w0 = np.stack([model[1].weight.detach().double().numpy()] * n)
    b0 = np.stack([model[1].bias.detach().double().numpy()] * n)
    w, b = w0.copy(), b0.copy()
    mom_w, mom_b = np.zeros_like(w), np.zeros_like(b)
    for _ in range(tau_a):
        grads = [softmax_grad(w[i], b[i], data[i].x_train.astype(np.float64), data[i].y_train)
                 for i in range(n)]
        for i in range(n):
            mom_w[i] = grads[i][0] + rho[i] * mom_w[i]
            mom_b[i] = grads[i][1] + rho[i] * mom_b[i]
        d_w = mom_w + np.array(mu)[:, None, None] * (w - w0)
        d_b = mom_b + np.array(mu)[:, None] * (b - b0)
        w = np.einsum("ji,jab->iab", intra, w) - lr * d_w
        b = intra.T @ b - lr * d_b
    for _ in range(tau_r):
        w = np.einsum("ji,jab->iab", inter, w)
        b = inter.T @ b
    deviation = 0.0
    for i in ids:
        final = load_file(str(run / "final" / f"node-{i}.safetensors"))
        deviation = max(deviation, np.abs(final["1.weight"] - w[i]).max(),
                        np.abs(final["1.bias"] - b[i]).max())
    assert deviation < 1e-6
    assert np.abs(w - w0).max() > 1e-2  # it trained


def test_s_forced_to_1_equals_global_matrix_in_both_regimes(tmp_path: Path) -> None:
    topo = topology(tmp_path, LINE6, "line6")
    common = ("--transport", "inproc", "--rounds", "2", *FAST, "--set", "tau_a=2")
    launch_ok(tmp_path / "s1", topo, "ssd-fl", *common,
              "--set", "hyper.clustering={override_S: 1}")
    launch_ok(tmp_path / "global", topo, "ssd-fl", *common, "--set", "regimes=global")
    assert read(tmp_path / "s1", "prephase.json")["clusters"] == [list(range(6))]
    assert read(tmp_path / "global", "prephase.json")["s_star"] > 1  # its own clusters unused
    a, b = final_files(tmp_path / "s1"), final_files(tmp_path / "global")
    assert len(a) == 6 and a == b


def test_node_without_in_cluster_neighbour_trains_alone_without_deadlock(tmp_path: Path) -> None:
    """Node 3 hangs off a triangle and forms its own cluster: real processes, no waiting on it
    in the intra regime; the per-cycle messages are tau_a * 2|E~| + tau_r * 2|E|."""
    tau_a, tau_r = 3, 1
    summary = launch_ok(tmp_path / "run", topology(tmp_path, PENDANT, "pendant"), "ssd-fl",
                        "--transport", "zmq", "--rounds", "2", *FAST,
                        "--set", f"tau_a={tau_a}", "--set", f"tau_r={tau_r}",
                        "--set", "hyper.clustering={override_partition: [[0, 1, 2], [3]]}",
                        "--set", "wire.recv_timeout_s=60")
    assert summary["status"] == "ok"
    for entry in summary["ledger"]["per_round"].values():
        assert entry["messages"] == tau_a * 2 * 3 + tau_r * 2 * 4
    ledger = read(tmp_path / "run", "ledger.json")
    assert ledger["3"]["per_link"]["3->2"]["messages"] == 2 * tau_r  # inter regime only
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert {m["cluster"] for m in metrics if m["node"] == 3} == {1}


def test_bad_settings_exit_2(tmp_path: Path) -> None:
    for bad in ("tau_a=0", "regimes=mixed", "hyper.clustering={conductance: fast}",
                "local_steps=-1"):
        proc = launch(tmp_path / "bad", "complete10", "ssd-fl", *FAST, "--set", bad)
        assert proc.returncode == 2 and proc.stdout == ""
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_topology_optimizer_attribute_is_validated_at_launch(tmp_path: Path) -> None:
    for node, expect in (("{id: 5, optimzer: sgd}", "nodes[5].optimzer: unknown key (did you "
                                                    "mean optimizer?)"),
                         ("{id: 5, optimizer: {type: sgd, rho: 0.5}}", "nodes[5].optimizer")):
        topo = topology(tmp_path, LINE6.replace("{id: 5}", node), "typo")
        proc = launch(tmp_path / "bad", topo, "ssd-fl", *FAST, "--set", "optimizers=topology")
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and expect in proc.stderr, proc.stderr


def test_the_initial_loss_over_a_sample_of_the_shard(tmp_path: Path) -> None:
    """`loss_sample` (a smoke reproduction's): L_i(theta^0) over that many of a device's
    samples, the same in every run of the seed; one at least the shard's size is the paper's
    loss over the whole shard, exactly."""
    pendant = topology(tmp_path, PENDANT, "pendant")

    def init_losses(name: str, *args: str) -> dict[str, float]:
        launch_ok(tmp_path / name, pendant, "ssd-fl", *FAST, "--rounds", "1", "--transport",
                  "inproc", *args)
        return {node: row["init_loss"]
                for node, row in read(tmp_path / name, "prephase.json")["nodes"].items()}

    whole = init_losses("whole")
    assert init_losses("at-least-the-shard", "--set", "loss_sample=100000") == whole
    sampled = init_losses("sampled", "--set", "loss_sample=7")
    assert sampled == init_losses("sampled-again", "--set", "loss_sample=7")
    assert sampled.keys() == whole.keys() and all(sampled[n] != whole[n] for n in whole)
