"""Epidemic Learning (EL-Local) end to end: both transports equal bit for bit on a
random-peers schedule, formula bits on the out-arcs equal to a hand count, an independent numpy
run of the same draws (in-degrees from 0 up), and kill-and-resume equal to a run that never
stopped."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from dfl_node.learning.models import build_model
from dfl_node.learning.shards import load_node_data
from dfl_node.settings.data_section import DataSection
from tests.harness import (
    assert_transports_identical,
    charged_and_drawn_arcs,
    launch_ok,
    random_peers_file,
)
from tests.test_dpsgd import softmax_grad
from tests.test_resume import assert_resumed_equals_uninterrupted
from topologies.schedules import RoundGraphs

SYNTHETIC = ("--dataset", "synthetic", "--partition", "iid")
LINEAR = ("--set", "model={name: linear}")
P_LINEAR = 32 * 10 + 10  # the synthetic task's linear model: 32 features, 10 classes


def test_zmq_equals_inproc_and_the_bits_are_the_hand_count(tmp_path: Path) -> None:
    """s P 32 bits per node and round: 6 nodes x 2 peers x 3 rounds x P x 32, each message
    charged on an arc the plan drew for its round."""
    rounds, n, peers = 3, 6, 2
    zmq_sum, _ = assert_transports_identical(tmp_path, random_peers_file(tmp_path, n, peers),
                                             "epidemic", *SYNTHETIC, *LINEAR,
                                             "--rounds", str(rounds))
    assert zmq_sum["formula"]["total_bits"] == n * peers * rounds * P_LINEAR * 32
    charged, drawn = charged_and_drawn_arcs(tmp_path / "zmq", rounds)
    assert charged == drawn


def test_matches_an_independent_numpy_run_of_the_same_draws(tmp_path: Path) -> None:
    """x_i <- (x_i' + sum of the x_j' received) / (1 + received), x' = x - lr grad, in float64
    on full batches; who sent to whom is the plan's draw, and some node receives nothing."""
    lr, rounds, n = 0.2, 4, 6
    launch_ok(tmp_path / "run", random_peers_file(tmp_path, n, 1), "epidemic", "--transport",
              "inproc", "--rounds", str(rounds), *LINEAR, "--set", "batch_size=100000",
              "--set", f"lr={lr}", *SYNTHETIC)
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    graphs = RoundGraphs.from_topology(plan["topology"])
    section = DataSection.model_validate(plan["data"])
    data = [load_node_data(section, list(range(n)), i) for i in range(n)]
    model = build_model({"name": "linear"}, (32,), 10, plan["seed"])
    x_w = np.stack([model[1].weight.detach().double().numpy()] * n)
    x_b = np.stack([model[1].bias.detach().double().numpy()] * n)
    lonely = 0
    for r in range(rounds):
        grads = [softmax_grad(x_w[i], x_b[i], data[i].x_train.astype(np.float64),
                              data[i].y_train) for i in range(n)]
        half_w = x_w - lr * np.stack([g[0] for g in grads])
        half_b = x_b - lr * np.stack([g[1] for g in grads])
        senders = [[u for u, v in graphs.arcs(r, plan["seed"]) if v == i] for i in range(n)]
        lonely += sum(not s for s in senders)
        x_w = np.stack([half_w[[i, *senders[i]]].mean(axis=0) for i in range(n)])
        x_b = np.stack([half_b[[i, *senders[i]]].mean(axis=0) for i in range(n)])
    assert lonely > 0  # a node that received nothing keeps its own model
    for i in range(n):
        final = load_file(str(tmp_path / "run" / "final" / f"node-{i}.safetensors"))
        np.testing.assert_allclose(final["1.weight"], x_w[i], atol=1e-5, rtol=0)
        np.testing.assert_allclose(final["1.bias"], x_b[i], atol=1e-5, rtol=0)


@pytest.mark.slow
def test_killed_and_resumed_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    """The same draws after a resume (they come from the plan and the round), so the same
    bytes; 22 s here, slow since tests/test_sgp.py's twin covers the random-peers resume in
    the default suite."""
    assert_resumed_equals_uninterrupted(
        tmp_path, random_peers_file(tmp_path, 5, 2), "epidemic", 2, *SYNTHETIC, *LINEAR,
        "--rounds", "4", "--eval-every", "2", "--checkpoint-every", "2", "--set",
        "local_steps=2")
