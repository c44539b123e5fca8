"""Eqs. 8-10 on a toy quadratic: the optimizer's recursion against the paper's closed forms."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from dfl_config.problems import one_line
from protocols.ssdfl.declarations import CycleHyper
from protocols.ssdfl.direction import UnifiedDirection
from protocols.ssdfl.optimizers import OptimizerConfig, SSDFLNodeAttributes, draw_optimizer

Q = np.diag([1.0, 3.0, 0.5])
B = np.array([1.0, -2.0, 0.5])
ETA = 0.1


def grad(theta: np.ndarray) -> np.ndarray:
    """f(theta) = theta^T Q theta / 2 - b^T theta."""
    return Q @ theta - B


def run(spec: OptimizerConfig, theta0: np.ndarray, steps: int, regimes: int = 1) -> np.ndarray:
    """theta^{q+1} = theta^q - eta g~(theta^q) with the module's direction, resetting per regime."""
    opt = UnifiedDirection(spec)
    theta = torch.tensor(theta0, dtype=torch.float64)
    for _ in range(regimes):
        opt.reset({"w": theta})
        for _ in range(steps):
            g = torch.from_numpy(grad(theta.numpy()))
            theta = theta - ETA * opt.direction("w", g, theta)
    return theta.numpy()


def closed_form(mu: float, rho: float, theta0: np.ndarray, steps: int) -> np.ndarray:
    """Eq. 10 written out: g^q + sum_{p<q} rho^{q-p} g^p + mu (theta^q - theta^0)."""
    thetas, grads = [theta0], []
    for q in range(steps):
        grads.append(grad(thetas[q]))
        d = grads[q] + sum(rho ** (q - p) * grads[p] for p in range(q))
        d = d + mu * (thetas[q] - theta0)
        thetas.append(thetas[q] - ETA * d)
    return thetas[-1]


THETA0 = np.array([0.3, -0.7, 2.0])


@pytest.mark.parametrize("spec", [OptimizerConfig(), OptimizerConfig(type="prox", mu=0.5),
                                  OptimizerConfig(type="momentum", rho=0.85)])
def test_recursions_match_eqs_8_and_9(spec: OptimizerConfig) -> None:
    got = run(spec, THETA0, 12)
    want = closed_form(spec.mu, spec.rho, THETA0, 12)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    if spec.type != "sgd":  # the extra term really changed the trajectory
        assert np.abs(got - closed_form(0.0, 0.0, THETA0, 12)).max() > 1e-3


def test_state_resets_at_every_regime() -> None:
    spec = OptimizerConfig(type="momentum", rho=0.8)
    middle = closed_form(0.0, 0.8, THETA0, 4)
    np.testing.assert_allclose(run(spec, THETA0, 4, regimes=2),
                               closed_form(0.0, 0.8, middle, 4), rtol=0, atol=1e-12)
    prox = OptimizerConfig(type="prox", mu=0.5)
    middle = closed_form(0.5, 0.0, THETA0, 4)  # the anchor moves to the regime's start
    np.testing.assert_allclose(run(prox, THETA0, 4, regimes=2),
                               closed_form(0.5, 0.0, middle, 4), rtol=0, atol=1e-12)


def test_specs_validate_and_round_trip() -> None:
    specs = (OptimizerConfig(), OptimizerConfig(type="prox", mu=1e-4),
             OptimizerConfig(type="momentum", rho=0.8))
    for spec in specs:
        assert OptimizerConfig.from_array(spec.to_array()) == spec
    with pytest.raises(ValueError):
        OptimizerConfig(type="momentum", rho=1.0)
    with pytest.raises(ValueError):
        OptimizerConfig(type="sgd", mu=0.1)
    with pytest.raises(ValueError):
        OptimizerConfig.from_array(np.array([7.0, 0.0, 0.0]))
    assert OptimizerConfig.from_attrs({"optimizer": {"type": "prox", "mu": 0.2}}).mu == 0.2
    assert OptimizerConfig.from_attrs({}) == OptimizerConfig()
    assert OptimizerConfig.from_attrs({"optimizer": "prox"}) == OptimizerConfig(type="prox")


def test_node_attribute_refuses_what_the_optimizer_cannot_be() -> None:
    for bad, where in (({"type": "adam"}, "type"), ({"type": "prox", "rho": 0.5}, "optimizer"),
                       ({"type": "momentum", "rh": 0.5}, "rh")):
        with pytest.raises(ValidationError) as info:
            SSDFLNodeAttributes.model_validate({"optimizer": bad})
        assert where in one_line(info.value, SSDFLNodeAttributes)
    with pytest.raises(ValidationError) as info:
        SSDFLNodeAttributes.model_validate({"optimizer": {"type": "momentum", "rh": 0.5}})
    assert one_line(info.value, SSDFLNodeAttributes).endswith("(did you mean rho?)")


def test_paper_draw_covers_all_types_with_paper_values() -> None:
    hyper = CycleHyper()  # the defaults are the paper's values (Sec. VI-A)
    draws = [draw_optimizer(np.random.default_rng(s), hyper.prox_mu, hyper.momentum_rho)
             for s in range(60)]
    assert {d.type for d in draws} == {"sgd", "prox", "momentum"}
    assert {d.mu for d in draws if d.type == "prox"} == {5e-5, 1e-4}
    assert {d.rho for d in draws if d.type == "momentum"} == {0.8, 0.85}
