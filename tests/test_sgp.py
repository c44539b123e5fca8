"""SGP (Push-Sum SGD) end to end: both transports equal bit for bit on a random-peers
schedule, formula bits charged on the out-arcs and equal to a hand count, an independent numpy
Push-Sum on a directed graph of unequal out-degrees, and kill-and-resume equal to a run that
never stopped."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from dfl_node.learning.models import build_model
from dfl_node.learning.shards import load_node_data
from dfl_node.settings.data_section import DataSection
from protocols.sdk.mixing import push_row
from tests.harness import (
    assert_transports_identical,
    charged_and_drawn_arcs,
    launch_ok,
    random_peers_file,
)
from tests.test_dpsgd import softmax_grad
from tests.test_resume import assert_resumed_equals_uninterrupted

SYNTHETIC = ("--dataset", "synthetic", "--partition", "iid")
LINEAR = ("--set", "model={name: linear}")
P_LINEAR = 32 * 10 + 10  # the synthetic task's linear model: 32 features, 10 classes


def test_zmq_equals_inproc_and_the_bits_are_the_hand_count(tmp_path: Path) -> None:
    """(P + 1) 32 bits per out-arc and round: 6 nodes x 2 peers x 3 rounds, each charged on an
    arc the plan drew for that round."""
    rounds, n, peers = 3, 6, 2
    zmq_sum, _ = assert_transports_identical(tmp_path, random_peers_file(tmp_path, n, peers),
                                             "sgp", *SYNTHETIC, *LINEAR, "--rounds", str(rounds))
    assert zmq_sum["formula"]["total_bits"] == n * peers * rounds * (P_LINEAR + 1) * 32
    charged, drawn = charged_and_drawn_arcs(tmp_path / "zmq", rounds)
    assert charged == drawn


def test_push_rows_make_a_column_stochastic_matrix() -> None:
    """Stacking every node's `push_row` gives P with columns summing to 1 and p_ij =
    1 / (1 + d_out(j)) on self and in-arcs, zero elsewhere (the SDK's mixing helper)."""
    arcs = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (0, 2), (0, 3), (2, 4)]
    out_degree = {j: sum(u == j for u, _ in arcs) for j in range(5)}
    p = np.zeros((5, 5))
    for i in range(5):
        row = push_row(i, [u for u, v in arcs if v == i], out_degree.__getitem__)
        assert list(row) == sorted(row)  # the order `mix` sums in
        for j, weight in row.items():
            p[i, j] = weight
    np.testing.assert_allclose(p.sum(axis=0), 1.0, rtol=0, atol=1e-15)
    assert p[2, 0] == 0.25 and p[0, 0] == 0.25 and p[1, 2] == 0.0
    assert np.abs(p.sum(axis=1) - 1).max() > 0.1  # not row-stochastic: what w corrects


DIRECTED5 = """\
directed: true
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}, {id: 4}]
edges: [[0, 1], [1, 2], [2, 3], [3, 4], [4, 0], [0, 2], [0, 3], [2, 4]]
"""


def test_matches_an_independent_numpy_push_sum(tmp_path: Path) -> None:
    """Assran et al.'s Algorithm 1 in float64, full batch, on a directed graph whose out-degrees
    differ (3, 1, 2, 1, 1), so that the Push-Sum weights leave 1 and z = x / w matters."""
    lr, rounds = 0.2, 5
    topology = tmp_path / "directed5.yaml"
    topology.write_text(DIRECTED5)
    launch_ok(tmp_path / "run", str(topology), "sgp", "--transport", "inproc", "--rounds",
              str(rounds), *LINEAR, "--set", "batch_size=100000", "--set", f"lr={lr}",
              *SYNTHETIC)
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    n = 5
    arcs = [tuple(e) for e in plan["topology"]["edges"]]
    out_degree = np.bincount([u for u, _ in arcs], minlength=n)
    p = np.eye(n) / (1 + out_degree)[None, :]  # p_jj = 1 / (1 + d_out(j))
    for u, v in arcs:
        p[v, u] = 1.0 / (1 + out_degree[u])  # j = u pushes to i = v
    np.testing.assert_allclose(p.sum(axis=0), 1.0)  # column-stochastic
    section = DataSection.model_validate(plan["data"])
    data = [load_node_data(section, list(range(n)), i) for i in range(n)]
    model = build_model({"name": "linear"}, (32,), 10, plan["seed"])
    x_w = np.stack([model[1].weight.detach().double().numpy()] * n)
    x_b = np.stack([model[1].bias.detach().double().numpy()] * n)
    w = np.ones(n)
    for _ in range(rounds):
        grads = [softmax_grad(x_w[i] / w[i], x_b[i] / w[i],
                              data[i].x_train.astype(np.float64), data[i].y_train)
                 for i in range(n)]
        x_w = np.einsum("ij,jab->iab", p, x_w - lr * np.stack([g[0] for g in grads]))
        x_b = p @ (x_b - lr * np.stack([g[1] for g in grads]))
        w = p @ w
    assert np.abs(w - 1).max() > 0.1
    for i in range(n):
        final = load_file(str(tmp_path / "run" / "final" / f"node-{i}.safetensors"))
        np.testing.assert_allclose(final["1.weight"], x_w[i] / w[i], atol=1e-5, rtol=0)
        np.testing.assert_allclose(final["1.bias"], x_b[i] / w[i], atol=1e-5, rtol=0)


def test_killed_and_resumed_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    """The Push-Sum numerator and weight are in the checkpoint: a resumed run ends in the
    same bytes (final files, metrics, ledgers, formula bits)."""
    assert_resumed_equals_uninterrupted(
        tmp_path, random_peers_file(tmp_path, 5, 2), "sgp", 2, *SYNTHETIC, *LINEAR,
        "--rounds", "4", "--eval-every", "2", "--checkpoint-every", "2")
