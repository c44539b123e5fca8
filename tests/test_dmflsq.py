"""DMFL-SQ end to end: the paper's consensus bits, two independent references, the common-copy
property across processes, silence on the data plane, and zmq == inproc."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from torch.nn import functional as F

from dfl_node.learning.models import build_model
from dfl_node.learning.seeds import numpy_stream
from dfl_node.learning.shards import load_node_data
from dfl_node.settings.data_section import DataSection
from launcher.config.layers import preset_file
from tests.harness import assert_transports_identical, launch, launch_ok

SYNTHETIC = ("--dataset", "synthetic", "--partition", "iid")
LINEAR = ("--set", "model={name: linear}")
# Six clients, a triangle with a tail, non-unit weights for `a_ij: from_topology`; diameter 3.
WEIGHTED6 = """\
name: weighted6
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}, {id: 4}, {id: 5}]
edges:
  - {u: 0, v: 1, weight: 0.5}
  - {u: 1, v: 2, weight: 1.5}
  - {u: 0, v: 2, weight: 1.0}
  - {u: 2, v: 3, weight: 2.0}
  - {u: 3, v: 4, weight: 0.25}
  - {u: 4, v: 5, weight: 1.0}
"""


@pytest.fixture
def weighted6(tmp_path: Path) -> str:
    path = tmp_path / "weighted6.yaml"
    path.write_text(WEIGHTED6)
    return str(path)


def read_run(run: Path) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    summary = json.loads((run / "summary.json").read_text())
    plan = json.loads((run / "plan.json").read_text())
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return summary, plan, metrics


def edge_list(plan: dict[str, Any]) -> list[tuple[int, int, float]]:
    out = []
    for e in plan["topology"]["edges"]:
        if isinstance(e, dict):
            out.append((int(e["u"]), int(e["v"]), float(e.get("weight", 1.0))))
        else:
            out.append((int(e[0]), int(e[1]), 1.0))
    return out


def neighbours(plan: dict[str, Any]) -> dict[int, list[int]]:
    nbrs: dict[int, set[int]] = defaultdict(set)
    for u, v, _ in edge_list(plan):
        nbrs[u].add(v)
        nbrs[v].add(u)
    return {i: sorted(js) for i, js in nbrs.items()}


def flat_params(run: Path, node: int, names: list[str]) -> np.ndarray:
    final = load_file(str(run / "final" / f"node-{node}.safetensors"))
    return np.concatenate([final[name].ravel() for name in names])


def copies(run: Path, node: int) -> dict[str, np.ndarray]:
    return load_file(str(run / "final" / f"node-{node}-copies.safetensors"))


def param_names(plan: dict[str, Any], input_shape: tuple[int, ...], classes: int) -> list[str]:
    """Parameter names in the model's order, which is the order of the flat vectors."""
    model = build_model(plan["model"], input_shape, classes, plan["seed"])
    return [name for name, _ in model.named_parameters()]


@pytest.mark.parametrize(("topology", "edges", "bits"),
                         [("ring20", 20, 740), ("er20-p05", 95, 703), ("rgg20-r04", 60, 888)])
def test_one_round_records_the_papers_consensus_bits(tmp_path: Path, topology: str, edges: int,
                                                     bits: int) -> None:
    """740 / 703 / 888 consensus bits per client per round (Sec. VI), read from the run dir."""
    run = tmp_path / "run"
    launch_ok(run, topology, "dmfl-sq", "--transport", "inproc", "--rounds", "1", *SYNTHETIC,
              *LINEAR)
    summary, plan, metrics = read_run(run)
    n = len(plan["nodes"])
    psi = summary["formula"]["per_round"]["0"]["psi"]
    assert psi / n == bits
    # Per client, K_Psi = diam sub-rounds of 37 bits on each of its links; as real messages, the
    # wire ledger holds exactly K_Psi |E| 2 consensus messages in round 0 besides the model's.
    k_psi = bits * n // (74 * edges)
    for rec in metrics:
        assert rec["psi_bits"] == 37 * k_psi * len(neighbours(plan)[rec["node"]])
    triggered = {rec["node"] for rec in metrics if rec["triggered"]}
    sent_model = sum(len(neighbours(plan)[i]) for i in triggered)
    assert summary["ledger"]["per_round"]["0"]["messages"] == 2 * edges * k_psi + sent_model
    # Every client agrees on the selected one: the central argmax of the float32 losses.
    selected = {rec["selected"] for rec in metrics}
    assert len(selected) == 1
    losses = {rec["node"]: np.float32(rec["f_hat"]) for rec in metrics}
    assert selected.pop() == max(losses, key=lambda i: (losses[i], i))


def softmax_loss_grad(w: np.ndarray, b: np.ndarray, x: np.ndarray,
                      y: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    logits = x @ w.T + b
    logits -= logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    loss = -logp[np.arange(len(y)), y].mean()
    p = np.exp(logp)
    p[np.arange(len(y)), y] -= 1.0
    p /= len(y)
    return float(loss), p.T @ x, p.sum(axis=0)


def test_identity_and_theta0_is_synchronous_sgd_on_the_coupled_objective(
        tmp_path: Path, weighted6: str) -> None:
    """C = identity, theta = 0: every copy is the true neighbour model, and dmfl-sq is SGD on
    sum_i F_i + (alpha/2) sum_E a_ij ||w_i - w_j||^2 + rho max_i F_i, with the max taken at the
    selected client: an independent float64 numpy implementation, full batches, 10 rounds."""
    lr, alpha, rho, rounds = 0.3, 0.4, 0.5, 10
    run = tmp_path / "run"
    launch_ok(run, weighted6, "dmfl-sq", "--transport", "inproc", "--rounds", str(rounds),
              "--eval-every", "1", *SYNTHETIC, *LINEAR,
              "--set", "compressor={type: identity}", "--set", "trigger=zero",
              "--set", "a_ij=from_topology", "--set", f"lr={lr}", "--set", f"alpha={alpha}",
              "--set", f"rho={rho}", "--set", "batch_sel=100000", "--set", "batch_grad=100000")
    summary, plan, metrics = read_run(run)
    ids = [n["id"] for n in plan["nodes"]]
    data = [load_node_data(DataSection.model_validate(plan["data"]), ids, i) for i in ids]
    model = build_model({"name": "linear"}, (32,), 10, plan["seed"])
    w = np.stack([model[1].weight.detach().double().numpy()] * len(ids))
    b = np.stack([model[1].bias.detach().double().numpy()] * len(ids))
    edges = edge_list(plan)
    assert sorted(a for _, _, a in edges) != [1.0] * len(edges)
    picked = []
    for _ in range(rounds):
        out = [softmax_loss_grad(w[i], b[i], data[i].x_train.astype(np.float64),
                                 data[i].y_train) for i in ids]
        losses = np.array([o[0] for o in out], dtype=np.float32)
        star = max(ids, key=lambda i: (losses[i], i))
        picked.append(star)
        scale = 1 + rho * (np.arange(len(ids)) == star)  # (1 + rho lambda_i)
        gw = np.stack([o[1] for o in out]) * scale[:, None, None]
        gb = np.stack([o[2] for o in out]) * scale[:, None]
        cw, cb = np.zeros_like(w), np.zeros_like(b)
        for u, v, a in edges:  # grad of (alpha/2) a ||w_u - w_v||^2, one term per undirected edge
            cw[u] += alpha * a * (w[u] - w[v])
            cw[v] += alpha * a * (w[v] - w[u])
            cb[u] += alpha * a * (b[u] - b[v])
            cb[v] += alpha * a * (b[v] - b[u])
        w, b = w - lr * (gw + cw), b - lr * (gb + cb)
    for i in ids:
        final = load_file(str(run / "final" / f"node-{i}.safetensors"))
        np.testing.assert_allclose(final["1.weight"], w[i], atol=1e-6, rtol=0)
        np.testing.assert_allclose(final["1.bias"], b[i], atol=1e-6, rtol=0)
    assert np.abs(w - model[1].weight.detach().double().numpy()).max() > 0.05  # it moved
    # The selection, round by round, at every client, and it was not always the same client.
    by_round: dict[int, set[float]] = defaultdict(set)
    for rec in metrics:
        by_round[rec["round"] - 1].add(rec["selected"])
    assert [by_round[t] for t in range(rounds)] == [{float(s)} for s in picked]
    assert summary["trigger_rate"] == 1.0
    # Every copy is the true neighbour model: bit for bit at the end ...
    names = param_names(plan, (32,), 10)
    size = sum(load_file(str(run / "final" / "node-0.safetensors"))[n].size for n in names)
    for i in ids:
        mine = copies(run, i)
        assert np.array_equal(mine["w_hat_self"], flat_params(run, i, names))
        for j in neighbours(plan)[i]:
            assert np.array_equal(mine[f"w_hat_from_{j}"], flat_params(run, j, names))
    # ... and at every round: the residual ||w_i - w_hat_i||^2 (= E^t by the common copy) is 0.
    assert all(rec["comm_residual"] == 0.0 for rec in metrics)
    # Dense float32 messages: P values at 32 bits, a header, no positions, no scale, every link.
    per_round = summary["formula"]["per_round"]["3"]
    assert per_round["values"] == 2 * len(edges) * 32 * size
    assert per_round["header"] == 2 * len(edges) * 32
    assert "positions" not in per_round and "scale" not in per_round


def local_sgd_reference(plan: dict[str, Any], ids: list[int], rounds: int, lr: float,
                        batch: int) -> dict[int, dict[str, torch.Tensor]]:
    """Independent local SGD per client, on the client's own "grad-batch" stream."""
    out = {}
    for i in ids:
        data = load_node_data(DataSection.model_validate(plan["data"]), ids, i)
        model = build_model(plan["model"], data.input_shape, data.classes, plan["seed"])
        rng = numpy_stream(plan["seed"], i, "grad-batch")
        order = np.empty(0, dtype=np.int64)
        for _ in range(rounds):
            if len(order) < batch:
                order = rng.permutation(len(data.y_train))
            idx, order = np.sort(order[:batch]), order[batch:]
            loss = F.cross_entropy(model(torch.from_numpy(data.x_train[idx])),
                                   torch.from_numpy(data.y_train[idx]))
            grads = torch.autograd.grad(loss, list(model.parameters()))
            with torch.no_grad():
                for p, g in zip(model.parameters(), grads, strict=True):
                    p.copy_(p - lr * g)
        out[i] = {k: v.detach() for k, v in model.state_dict().items()}
    return out


def test_alpha0_rho0_is_independent_local_sgd(tmp_path: Path, weighted6: str) -> None:
    rounds, lr = 10, 0.1
    run = tmp_path / "run"
    summary = launch_ok(run, weighted6, "dmfl-sq", "--transport", "inproc", "--rounds",
                        str(rounds), *SYNTHETIC, "--set", "alpha=0", "--set", "rho=0",
                        "--set", f"lr={lr}", "--set", "theta0=0.01")
    _, plan, _ = read_run(run)
    ids = [n["id"] for n in plan["nodes"]]
    reference = local_sgd_reference(plan, ids, rounds, lr, 32)
    for i in ids:
        final = load_file(str(run / "final" / f"node-{i}.safetensors"))
        for name, value in reference[i].items():
            np.testing.assert_allclose(final[name], value.numpy(), atol=1e-6, rtol=0)
    # Trajectories differ across clients (their own data), models were exchanged, and rho = 0
    # skipped the consensus: nothing charged for it, nobody selected.
    assert not np.allclose(load_file(str(run / "final" / "node-0.safetensors"))["3.bias"],
                           load_file(str(run / "final" / "node-5.safetensors"))["3.bias"])
    assert summary["trigger_rate"] > 0.5
    assert all("psi" not in row for row in summary["formula"]["per_round"].values())
    assert summary["selected_histogram"] == {}


def test_silent_clients_send_no_data_and_their_copies_stay(tmp_path: Path,
                                                           weighted6: str) -> None:
    """theta_0 between the clients' first-round innovation norms: the quiet half sends nothing
    on the data plane (only consensus pairs and the runtime's end-of-step marker), and every
    neighbour's copy of a quiet client is still w^0, bit for bit."""
    common = ("--transport", "inproc", "--rounds", "1", *SYNTHETIC, "--set", "trigger=constant")
    probe = tmp_path / "probe"
    launch_ok(probe, weighted6, "dmfl-sq", *common, "--set", "theta0=0")
    norms = sorted(rec["s_norm"] for rec in read_run(probe)[2])
    theta0 = (norms[2] + norms[3]) / 2
    assert norms[2] < theta0 < norms[3]
    run = tmp_path / "run"
    launch_ok(run, weighted6, "dmfl-sq", *common, "--set", f"theta0={theta0!r}")
    _, plan, metrics = read_run(run)
    fired = {rec["node"]: bool(rec["triggered"]) for rec in metrics}
    assert fired == {rec["node"]: rec["s_norm"] >= theta0 for rec in metrics}
    assert sum(fired.values()) == 3
    k_psi = 4  # diam(weighted6): 0-2-3-4-5
    ledger = json.loads((run / "ledger.json").read_text())
    nbrs = neighbours(plan)
    names = param_names(plan, (32,), 10)
    model = build_model(plan["model"], (32,), 10, plan["seed"])
    w0 = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy()
    for i, js in nbrs.items():
        cells = {(c["src"], c["traffic"]): c for c in ledger[str(i)]["cells"]
                 if c["dst"] == i and c["round"] == 0}
        for j in js:
            data = cells[(j, "data")]
            # K_Psi consensus pairs (float32 value + int64 id) always; the model only if fired.
            assert data["messages"] == k_psi + fired[j]
            if not fired[j]:
                assert data["payload_bytes"] == k_psi * 12
            assert cells[(j, "control")]["messages"] >= 1  # the end-of-step marker
            copy_of_j = copies(run, i)[f"w_hat_from_{j}"]
            assert np.array_equal(copy_of_j, w0) == (not fired[j])
            assert np.array_equal(copy_of_j, copies(run, j)["w_hat_self"])
    for j, sent in fired.items():
        assert np.array_equal(copies(run, j)["w_hat_self"], w0) == (not sent)
        assert not np.array_equal(flat_params(run, j, names), w0)  # everyone learned


def test_zmq_equals_inproc_and_copies_are_common_across_processes(tmp_path: Path) -> None:
    zmq_sum, _ = assert_transports_identical(tmp_path, "ring20", "dmfl-sq", *SYNTHETIC,
                                             "--rounds", "6", "--set", "theta0=0.2")
    assert len({n["pid"] for n in zmq_sum["nodes"]}) == 20
    assert 0 < zmq_sum["trigger_rate"] < 1
    run = tmp_path / "zmq"
    _, plan, _ = read_run(run)
    names = param_names(plan, (32,), 10)
    lossy = 0
    for i, js in neighbours(plan).items():
        mine = copies(run, i)["w_hat_self"]
        for j in js:
            theirs = copies(run, j)[f"w_hat_from_{i}"]
            assert mine.tobytes() == theirs.tobytes(), f"copy of {i} at {j} differs"
        lossy += not np.array_equal(mine, flat_params(run, i, names))
    assert lossy == 20  # Top-k + Q8 copies lag the true models: the property is not trivial


@pytest.mark.slow
def test_the_users_first_command(tmp_path: Path) -> None:
    """`dfl-launch --topology ring20.yaml --protocol dmfl-sq` with its defaults: Fashion-MNIST,
    Dirichlet(0.5) shards, local test splits, 100 rounds, 20 processes."""
    run = tmp_path / "run"
    proc = launch(run, "ring20.yaml", "dmfl-sq")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1].startswith(f"run_dir: {run}  avg_accuracy=")
    summary = read_run(run)[0]
    assert (summary["dataset"], summary["partition"], summary["eval_split"]) == \
        ("fmnist", "dirichlet:0.5", "local")
    assert len({n["pid"] for n in summary["nodes"]}) == 20
    assert summary["avg_accuracy"] > 0.6 and summary["worst_accuracy"] > 0.3
    per_round = summary["formula"]["per_round"]
    assert len(per_round) == 100 and all(row["psi"] == 14_800 for row in per_round.values())
    total = sum(sum(row.values()) for row in per_round.values())
    assert summary["bits_per_client"] == total / 20 == summary["formula"]["total_bits"] / 20
    assert 0 < summary["trigger_rate"] <= 1
    assert sum(summary["selected_histogram"].values()) == pytest.approx(100)
    for key in ("bottom10_accuracy", "std_accuracy", "jain_index", "cvar10_loss"):
        assert key in summary


@pytest.mark.slow
def test_the_papers_cifar10_setting_charges_the_papers_message(tmp_path: Path,
                                                               cifar_archive: Path) -> None:
    """The named CIFAR-10 config: P = 2,122,186, k = 21,222, so a triggered message costs
    8 k + 22 k + 32 + 32 bits on each link (positions as an index list: 22 k < P)."""
    config = preset_file("dmfl-sq-cifar10")
    run = tmp_path / "run"
    summary = launch_ok(run, "ring20", "dmfl-sq", "--config", str(config), "--data-root",
                        str(cifar_archive.parent), "--rounds", "2", "--eval-every", "2",
                        "--transport", "inproc")
    assert summary["dataset"] == "cifar10" and summary["partition"] == "dirichlet:0.1:64"
    k = 21_222
    assert summary["mean_k"] == k
    for row in summary["formula"]["per_round"].values():
        messages = row["header"] // 32
        assert messages > 0 and row["scale"] == 32 * messages
        assert row["values"] == 8 * k * messages and row["positions"] == 22 * k * messages
        assert row["psi"] == 14_800
