"""SSD-FL's baselines: sdfl = ssd-fl with S = 1, pdfl with tau_a = 0 = pure gossip (and its
contraction against the SLEM bound), stc with p_edge = 1 = sdfl, both ends of every stc edge
agree over zmq, the transports harness for all four, and bad settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from dfl_node.learning.models import build_model
from dfl_node.learning.seeds import numpy_stream, torch_stream
from protocols.ssdfl.stc_sampling import EdgeSampler, mixing_row, random_partition, same_cluster
from tests.harness import assert_transports_identical, final_files, launch, launch_ok
from tests.test_ssdfl import FAST, LINE6, topology
from topologies.measures import slem
from topologies.mixing import metropolis

BASE = ("--dataset", "synthetic", "--partition", "iid", "--set", "model={name: mlp}",
        "--set", "local_steps=1")


def read(run: Path, name: str) -> Any:
    return json.loads((run / name).read_text())


def jsonl(run: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / name).read_text().splitlines()]


def flat(tensors: dict[str, np.ndarray]) -> np.ndarray:
    """All tensors in name order, float64, one vector."""
    return np.concatenate([np.asarray(tensors[n], np.float64).ravel() for n in sorted(tensors)])


def line6_adjacency() -> np.ndarray:
    adj = np.zeros((6, 6))
    for u, v in [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (0, 2)]:
        adj[u, v] = adj[v, u] = 1.0
    return adj


def test_sdfl_is_bit_identical_to_ssdfl_with_s_forced_to_1(tmp_path: Path) -> None:
    topo = topology(tmp_path, LINE6, "line6")
    common = ("--transport", "inproc", "--rounds", "2", *FAST, "--set", "tau_a=2")
    launch_ok(tmp_path / "ssd", topo, "ssd-fl", *common,
              "--set", "hyper.clustering={override_S: 1}")
    summary = launch_ok(tmp_path / "sdfl", topo, "sdfl", *BASE, "--transport", "inproc",
                        "--rounds", "2", "--set", "tau_a=2")
    a, b = final_files(tmp_path / "ssd"), final_files(tmp_path / "sdfl")
    assert len(a) == 6 and a == b
    assert summary["prephase_bytes"] == 0  # no pre-phase: the rows are the plan's
    for entry in summary["ledger"]["per_round"].values():  # (tau_a + tau_r) 2|E| per cycle
        assert entry["messages"] == (2 + 1) * 2 * 6


def test_pdfl_with_tau_a_0_is_pure_gossip_contracting_at_the_slem_rate(tmp_path: Path) -> None:
    """Distinct starting models (init_spread), then Theta <- A^T Theta for K tau_r steps: the
    final models equal float64 numpy gossip, and the consensus gap the collector computed from
    the nodes' parameters falls by at least SLEM(A)^tau_r per cycle."""
    rounds, tau_r, spread = 4, 2, 0.5
    run = tmp_path / "run"
    summary = launch_ok(run, topology(tmp_path, LINE6, "line6"), "pdfl", *BASE,
                        "--transport", "inproc", "--rounds", str(rounds),
                        "--set", "model={name: linear}", "--set", "tau_a=0",
                        "--set", f"tau_r={tau_r}", "--set", f"init_spread={spread}")
    plan = read(run, "plan.json")
    a = metropolis(line6_adjacency())
    theta0 = []
    for i in range(6):
        model = build_model({"name": "linear"}, (32,), 10, plan["seed"])
        gen = torch_stream(plan["seed"], i, "init-spread")
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=gen), alpha=spread)
        theta0.append(flat({n: p.detach().numpy() for n, p in model.named_parameters()}))
    expected = np.linalg.matrix_power(a.T, rounds * tau_r) @ np.stack(theta0)
    got = np.stack([flat(load_file(str(run / "final" / f"node-{i}.safetensors")))
                    for i in range(6)])
    assert np.abs(got - expected).max() < 1e-5
    gap0 = np.sqrt(((np.stack(theta0) - np.mean(theta0, axis=0)) ** 2).sum())
    gaps = [row["consensus_gap"] for row in jsonl(run, "cycles.jsonl")]
    rate = slem(a) ** tau_r
    assert summary["spectral"]["global"]["slem"] == pytest.approx(slem(a), abs=1e-12)
    assert 0 < rate < 1 and len(gaps) == rounds
    for before, after in zip([gap0, *gaps], gaps, strict=False):
        assert after <= rate * before * (1 + 1e-6)
    assert gaps[-1] <= rate ** rounds * gap0 * (1 + 1e-6)
    assert gaps[-1] < 0.9 * gap0  # and it really contracted
    for entry in summary["ledger"]["per_round"].values():  # gossip only: tau_r 2|E|
        assert entry["messages"] == tau_r * 2 * 6


def test_stc_with_p_edge_1_equals_sdfl(tmp_path: Path) -> None:
    topo = topology(tmp_path, LINE6, "line6")
    common = (*BASE, "--transport", "inproc", "--rounds", "2")
    launch_ok(tmp_path / "sdfl", topo, "sdfl", *common)
    launch_ok(tmp_path / "stc1", topo, "stc", *common, "--set", "p_edge=1")
    launch_ok(tmp_path / "stc", topo, "stc", *common, "--set", "p_edge=0.5")
    sdfl = final_files(tmp_path / "sdfl")
    assert len(sdfl) == 6 and final_files(tmp_path / "stc1") == sdfl
    assert final_files(tmp_path / "stc") != sdfl


def test_stc_edge_states_agree_at_both_ends_over_zmq(tmp_path: Path) -> None:
    """Every node's ledger: in every round, u -> v carries exactly as many messages as v -> u,
    and both equal the steps in which edge (u, v)'s own stream, recomputed here, keeps it."""
    tau_a, tau_r, rounds, p_edge = 2, 1, 3, 0.5
    run = tmp_path / "run"
    summary = launch_ok(run, "ring20", "stc", *BASE, "--transport", "zmq",
                        "--rounds", str(rounds), "--set", f"tau_a={tau_a}",
                        "--set", f"tau_r={tau_r}", "--set", f"p_edge={p_edge}")
    assert summary["status"] == "ok" and summary["rejected_messages"] == {}
    plan = read(run, "plan.json")
    sent: dict[tuple[int, int, int], int] = {}
    for node, entry in read(run, "ledger.json").items():
        for cell in entry["cells"]:
            if cell["traffic"] == "data" and cell["src"] == int(node):
                sent[(cell["src"], cell["dst"], cell["round"])] = cell["messages"]
    steps = tau_a + tau_r
    for u, v in (tuple(sorted(e)) for e in plan["topology"]["edges"]):
        stream = numpy_stream(plan["seed"], -1, f"stc/{u}-{v}")
        kept = [stream.random() < p_edge for _ in range(rounds * steps)]
        for r in range(rounds):
            on = sum(kept[r * steps:(r + 1) * steps])
            assert sent.get((u, v, r), 0) == sent.get((v, u, r), 0) == on
    assert 0 < sum(sent.values()) < rounds * steps * 2 * 20  # some edges off, some on


def test_sampled_rows_and_random_clusters() -> None:
    adj = line6_adjacency()
    ids = list(range(6))
    edges = [(int(u), int(v)) for u, v in zip(*np.nonzero(np.triu(adj)), strict=True)]
    full = EdgeSampler(0, ids, edges, 1.0).next_adjacency()
    assert np.array_equal(full, adj)
    w = metropolis(adj)
    for i in ids:
        assert mixing_row(full, "metropolis", ids, i) == {j: w[i, j] for j in ids if w[i, j]}
    assert mixing_row(np.zeros((6, 6)), "metropolis", ids, 3) == {3: 1.0}  # isolated: keeps
    lazy_row = mixing_row(full, "lazy-metropolis", ids, 0)
    assert lazy_row[0] == pytest.approx((1 + w[0, 0]) / 2) and sum(lazy_row.values()) == 1.0
    for seed in range(20):
        clusters = random_partition(seed, list(range(30)), 2, None)
        sizes = sorted(len(c) for c in clusters)
        assert 2 <= len(clusters) <= 15 and sizes[-1] - sizes[0] <= 1
        assert sorted(i for c in clusters for i in c) == list(range(30))
    mask = same_cluster([0, 1, 2], [[0, 2], [1]])
    assert mask.tolist() == [[1, 0, 1], [0, 1, 0], [1, 0, 1]]


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["sdfl", "pdfl", "stc", "cstc"])
def test_transports_identical(tmp_path: Path, protocol: str) -> None:
    assert_transports_identical(tmp_path, topology(tmp_path, LINE6, "line6"), protocol, *BASE,
                                "--rounds", "2", "--set", "tau_a=2")


def test_bad_settings_exit_2(tmp_path: Path) -> None:
    for protocol, bad in (("pdfl", "tau_a=-1"), ("sdfl", "hyper.clustering={B: 1}"),
                          ("stc", "p_edge=0"), ("cstc", "clusters_max=1"),
                          ("sdfl", "tau_a=0"), ("sdfl", "cycle_metrics.params_every=-1"),
                          ("stc", "cycle_metrics.thresholds=[1.5]")):
        args = ("--set", "tau_r=0") if bad == "tau_a=0" else ()
        proc = launch(tmp_path / "bad", "complete10", protocol, *BASE, "--set", bad, *args)
        assert proc.returncode == 2 and proc.stdout == "", (bad, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
