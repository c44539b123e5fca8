"""DMFL-SQ's baselines: CHOCO-SGD, DSGT and q-FFL, run as real meshes.

Exactness across transports, CHOCO-SGD's reduction to D-PSGD, DSGT's tracking identity, and
q-FFL's aggregator role (a node of the plan that is never a client).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from tests.harness import assert_transports_identical, launch, launch_ok

FMNIST_P = 18_378  # the default CNN on Fashion-MNIST
SHORT = ("--rounds", "3", "--eval-every", "1")


@pytest.mark.parametrize("protocol", ["choco-sgd", "dsgt", "qffl"])
def test_transports_identical(tmp_path: Path, protocol: str) -> None:
    assert_transports_identical(tmp_path, "rgg10", protocol, *SHORT)


def models(run_dir: Path) -> dict[str, dict[str, np.ndarray]]:
    return {p.name: load_file(p) for p in sorted((run_dir / "final").glob("node-*.safetensors"))
            if not p.name.endswith("-copies.safetensors")}


def test_choco_with_identity_and_unit_step_is_dpsgd(tmp_path: Path) -> None:
    """x_i <- x_i^{+1/2} + 1 * sum_j W_ij (x_hat_j - x_hat_i) with exact copies is
    sum_j W_ij (x_j - eta g_j): D-PSGD in adapt-then-combine form, up to float rounding
    (x_hat + (x - x_hat) is x only to an ulp in float32). Two rounds: the ulps (3e-8 here) grow
    ~15x per round through the CNN's gradients, so later rounds test chaos, not the algebra."""
    common = ("--rounds", "2", "--transport", "inproc", "--set", "lr=0.05",
              "--set", "batch_size=32")
    launch_ok(tmp_path / "choco", "rgg10", "choco-sgd", *common,
              "--set", "compressor={type: identity}", "--set", "gamma=1",
              "--set", "weight_decay=0")
    launch_ok(tmp_path / "dpsgd", "rgg10", "d-psgd", *common, "--set", "form=atc",
              "--set", "local_steps=1")
    choco, dpsgd = models(tmp_path / "choco"), models(tmp_path / "dpsgd")
    assert sorted(choco) == sorted(dpsgd) and len(choco) == 10
    worst = max(float(np.abs(choco[n][k] - dpsgd[n][k]).max()) for n in choco for k in choco[n])
    assert worst < 1e-6
    # ... and the default compressor really changes the result (the test can fail).
    launch_ok(tmp_path / "q8", "rgg10", "choco-sgd", *common, "--set", "gamma=1",
              "--set", "weight_decay=0")
    q8 = models(tmp_path / "q8")
    assert max(float(np.abs(q8[n][k] - dpsgd[n][k]).max()) for n in q8 for k in q8[n]) > 1e-4


def test_dsgt_tracker_sum_is_gradient_sum_every_round(tmp_path: Path) -> None:
    rounds = 5
    summary = launch_ok(tmp_path, "ring20", "dsgt", "--rounds", str(rounds), "--eval-every", "1",
                        "--transport", "inproc", "--set", "tracker_clip=0")
    assert summary["status"] == "ok"
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    for r in range(1, rounds + 1):
        at = [row for row in rows if row["round"] == r]
        assert len(at) == 20 and not any(row["tracker_clipped"] for row in at)
        tracker = sum(row["tracker_probe"] for row in at)
        grads = sum(row["grad_probe"] for row in at)
        assert tracker == pytest.approx(grads, rel=1e-4, abs=1e-3)
    # The whole vectors after the last round, from final/.
    copies = [load_file(p) for p in (tmp_path / "final").glob("node-*-copies.safetensors")]
    assert len(copies) == 20
    y = np.sum([c["tracker"].astype(np.float64) for c in copies], axis=0)
    g = np.sum([c["last_gradient"].astype(np.float64) for c in copies], axis=0)
    assert y.shape == (FMNIST_P,)
    np.testing.assert_allclose(y, g, atol=2e-5 * max(1.0, float(np.abs(g).max())))


def test_dsgt_clipping_acts_and_is_reported(tmp_path: Path) -> None:
    launch_ok(tmp_path, "ring20", "dsgt", *SHORT, "--transport", "inproc",
              "--set", "tracker_clip=0.01")
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(row["tracker_clipped"] == 1.0 for row in rows)
    tracker = sum(row["tracker_probe"] for row in rows if row["round"] == 3)
    grads = sum(row["grad_probe"] for row in rows if row["round"] == 3)
    assert tracker != pytest.approx(grads, rel=1e-2)


def test_qffl_aggregator_is_a_node_apart(tmp_path: Path) -> None:
    rounds = 2
    summary = launch_ok(tmp_path, "ring20", "qffl", "--rounds", str(rounds), "--eval-every", "1")
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["aggregator"] == 20 and len(plan["nodes"]) == 21
    hub = next(n for n in plan["nodes"] if n["id"] == 20)
    assert hub["attrs"] == {"role": "aggregator"} and hub["address"].startswith("tcp://")
    assert [n["id"] for n in summary["nodes"]] == list(range(20))
    assert [a["id"] for a in summary["aggregators"]] == [20]
    assert summary["aggregators"][0]["accuracy"] is None
    assert (tmp_path / "logs" / "node-20.log").exists()
    # Every client holds the aggregator's model after the last download.
    final = models(tmp_path)
    hub_model = final["node-20.safetensors"]
    for i in range(20):
        for key, value in final[f"node-{i}.safetensors"].items():
            np.testing.assert_array_equal(value, hub_model[key])
    # B_client = 2 T P 32, and the evaluations come from the 20 clients only.
    assert summary["bits_per_client"] == 2 * rounds * FMNIST_P * 32
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert sorted({row["node"] for row in rows}) == list(range(20))


@pytest.mark.parametrize(("protocol", "setting", "message"), [
    ("choco-sgd", "gamma=0", "--set gamma=0: hyper.gamma: must be > 0"),
    ("choco-sgd", "copies_init=ones", "hyper.copies_init: input should be"),
    ("dsgt", "tracker_clip=-1", "--set tracker_clip=-1: hyper.tracker_clip: must be >= 0"),
    ("qffl", "q=-1", "--set q=-1: hyper.q: must be >= 0"),
    ("qffl", "hyper.accounting.b_hdr=-1", "hyper.accounting.b_hdr: must be >= 0"),
    ("dsgt", "hyper.lr_typo=1", "hyper.lr_typo: unknown key"),
])
def test_bad_settings_exit_2(tmp_path: Path, protocol: str, setting: str, message: str) -> None:
    proc = launch(tmp_path, "ring20", protocol, "--set", setting, timeout_s=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_qffl_refuses_tdma_before_starting(tmp_path: Path) -> None:
    proc = launch(tmp_path, "ring20", "qffl", "--set", "schedule=tdma", timeout_s=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "only with schedule=sync" in proc.stderr and len(proc.stderr.splitlines()) == 1
