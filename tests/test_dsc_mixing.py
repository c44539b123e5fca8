"""DSC's weights (paper Eq. 7, 8, 18) and mixing (Eq. 17, 19) against a worked example."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from protocols.dsc.mixing_weights import (
    adjacency,
    affinity_matrix,
    eq18_matrix,
    fedamp_row,
    fedavg_row,
    mix,
    perron_vector,
    softmax_weights,
    subdominant_modulus,
    task_affinity,
)
from protocols.dsc.node import combine

SEG = np.array([1, 1, 1, 1, 0, 0, 1, 0], dtype=np.float32)
SN = np.array([1, 1, 0, 1, 1, 1, 0, 1], dtype=np.float32)
DEP = np.array([1, 1, 0, 1, 1, 0, 0, 1], dtype=np.float32)
POLICIES = [{"seg": SEG, "sn": SN, "dep": DEP}, {"seg": SEG, "dep": DEP}, {"sn": SN, "dep": DEP},
            {"seg": SEG}]
EDGES = [(0, 1), (1, 2), (2, 3), (0, 2)]
ADJ = adjacency(4, EDGES)
# The graph of docs/protocols/dsc.md#worked-example.
S = [[1, .985, .933, .858], [.985, 1, .878, .900], [.933, .878, 1, .587], [.858, .900, .587, 1]]
W_TAU1 = [[.342, .343, .269, 0], [.337, .348, .254, 0], [.320, .308, .287, .398],
          [0, 0, .190, .602]]
W_TAU01 = [[.420, .400, .281, 0], [.364, .463, .162, 0], [.216, .137, .548, .016],
           [0, 0, .009, .984]]


def test_task_affinities_of_the_worked_example() -> None:
    assert task_affinity(SEG, SN) == pytest.approx(0.548, abs=1e-3)
    assert task_affinity(SEG, DEP) == pytest.approx(0.600, abs=1e-3)
    assert task_affinity(SN, DEP) == pytest.approx(0.913, abs=1e-3)
    assert task_affinity(SEG, np.zeros(8)) == 0.0  # a task that skips every block


def test_client_affinity_matrix_is_the_spec_s() -> None:
    full = affinity_matrix(POLICIES, np.ones((4, 4), dtype=bool))
    np.testing.assert_allclose(full, S, atol=1e-3)
    np.testing.assert_allclose(full, full.T)


@pytest.mark.parametrize(("tau", "expected", "rho", "v", "rows"), [
    (1.0, W_TAU1, 0.6262, [.267, .263, .318, .152], [.954, .940, 1.314, .792]),
    (0.1, W_TAU01, 0.9818, [.322, .293, .247, .138], [1.102, .989, .916, .993]),
])
def test_eq18_matrix_rho_perron_vector_and_row_sums(
    tau: float, expected: list[list[float]], rho: float, v: list[float], rows: list[float]
) -> None:
    w = eq18_matrix(affinity_matrix(POLICIES, ADJ), ADJ, tau)
    np.testing.assert_allclose(w, expected, atol=1e-3)
    np.testing.assert_allclose(w.sum(axis=0), 1.0, atol=1e-12)  # column-stochastic
    assert (w[~(ADJ | np.eye(4, dtype=bool))] == 0).all()  # zero off the graph
    assert subdominant_modulus(w) == pytest.approx(rho, abs=1e-4)
    np.testing.assert_allclose(perron_vector(w), v, atol=1e-3)
    np.testing.assert_allclose(w.sum(axis=1), rows, atol=1e-3)


def test_mean_preservation_and_j_single_steps_equal_w_to_the_j() -> None:
    w = eq18_matrix(affinity_matrix(POLICIES, ADJ), ADJ, 0.1)
    psi = np.random.default_rng(0).normal(size=(4, 1000))
    for j in range(1, 16):
        np.testing.assert_allclose(mix(w, psi, j).mean(axis=0), psi.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(mix(w, psi, 7), np.linalg.matrix_power(w, 7) @ psi, atol=1e-12)
    # W^J -> v 1^T: psi_i -> N v_i mean(psi)
    np.testing.assert_allclose(mix(w, psi, 4000), 4 * np.outer(perron_vector(w),
                                                               psi.mean(axis=0)), atol=1e-9)


def test_the_protocols_per_node_sums_are_w_to_the_j_in_float32() -> None:
    """J Jacobi steps of `combine` (node i: its row, its neighbours' step-(j-1) states) equal
    W^J Psi and keep the network mean to 1e-6 relative in fp32."""
    w = eq18_matrix(affinity_matrix(POLICIES, ADJ), ADJ, 1.0)
    rows = {i: {n: float(w[i, n]) for n in range(4) if w[i, n] > 0} for i in range(4)}
    psi0 = torch.from_numpy(np.random.default_rng(1).normal(size=(4, 500)).astype(np.float32))
    psi = list(psi0)
    for _ in range(5):
        psi = [combine(rows[i], i, psi[i], {n: {"psi": psi[n]} for n in range(4)}, "psi")
               for i in range(4)]
    got = torch.stack(psi).double().numpy()
    np.testing.assert_allclose(got, np.linalg.matrix_power(w, 5) @ psi0.double().numpy(),
                               rtol=1e-5, atol=1e-6)
    mean0 = psi0.double().mean(dim=0).numpy()
    assert np.abs(got.mean(axis=0) - mean0).max() <= 1e-6 * np.abs(psi0.numpy()).max()


def test_fedavg_column_uniform_is_eq18_with_constant_s_and_max_is_eq18_with_s_max() -> None:
    deg = ADJ.sum(axis=1)
    uniform = eq18_matrix(np.ones((4, 4)), ADJ, 0.1)
    for i in range(4):
        row = fedavg_row("column_uniform", i, {n: int(deg[n]) for n in np.flatnonzero(ADJ[i])},
                         int(deg[i]))
        assert all(row[n] == pytest.approx(uniform[i, n]) for n in row)
        metro = fedavg_row("metropolis", i, {n: int(deg[n]) for n in np.flatnonzero(ADJ[i])},
                           int(deg[i]))
        assert sum(metro.values()) == pytest.approx(1.0)
    s_max = affinity_matrix(POLICIES, ADJ, "max")
    assert s_max[1, 3] == 0 and s_max[0, 1] == pytest.approx(1.0)  # one exact task pair
    assert eq18_matrix(s_max, ADJ, 0.1).sum(axis=0) == pytest.approx(np.ones(4))


def test_fedamp_row_is_receiver_normalised_and_favours_similar_models() -> None:
    row = fedamp_row(0, {1: 0.99, 2: 0.95}, xi_self=1 / 3, sigma=25.0)
    assert sum(row.values()) == pytest.approx(1.0) and row[0] == pytest.approx(1 / 3)
    assert row[1] > row[2]


def test_softmax_weights_survive_a_tiny_temperature() -> None:
    w = softmax_weights({0: 1.0, 1: 0.2}, 1e-3)
    assert w == {0: 1.0, 1: 0.0}
