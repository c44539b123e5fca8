"""DMFL-SQ's bit formula (eqs. 18-20) and its configuration, without running a mesh."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dfl_node.learning.models import build_model
from launcher.config.layers import defaults_file, resolve_config
from protocols.dmflsq.dmflsq import DEFAULT_COMPRESSOR, DMFLSQ, DMFLSQConfig, value_bits
from protocols.dmflsq.dmflsq_bits import (
    PAPER_ACCOUNTING,
    Accounting,
    ceil_log2,
    model_link_bits,
    model_network_bits,
    psi_link_bits,
    psi_network_bits,
)
from protocols.toolkit.compressors import build_compressor, formula_bits

PAPER = Accounting(**PAPER_ACCOUNTING)


def test_ceil_log2_is_exact() -> None:
    assert [ceil_log2(x) for x in (1, 2, 3, 4, 5, 16, 17, 20, 2_122_186)] == \
        [0, 1, 2, 2, 3, 4, 5, 5, 22]
    with pytest.raises(ValueError):
        ceil_log2(0)


@pytest.mark.parametrize(("edges", "k_psi", "network", "per_client"),
                         [(20, 10, 14_800, 740), (95, 2, 14_060, 703), (60, 4, 17_760, 888)])
def test_consensus_bits_are_the_papers(edges: int, k_psi: int, network: int,
                                       per_client: int) -> None:
    """Eq. (19) with n = 20: 74 K_Psi |E| per round; 740 / 703 / 888 per client (Sec. VI)."""
    assert psi_link_bits(k_psi, 20, PAPER) == k_psi * 37
    assert psi_network_bits(k_psi, edges, 20, PAPER) == 74 * k_psi * edges == network
    assert network / 20 == per_client


def test_model_message_bits_term_by_term() -> None:
    """Eq. (18)'s bracket for the CIFAR CNN: P = 2,122,186, k = 21,222 (ratio 0.01)."""
    size, k = 2_122_186, 21_222
    bits = model_link_bits(True, k, size, PAPER)
    assert bits == {"values": 8 * k, "positions": 22 * k, "scale": 32, "header": 32,
                    "trigger": 0}
    assert bits["positions"] == 466_884 < size
    assert model_link_bits(False, 0, size, PAPER) == dict.fromkeys(bits, 0)
    # The mask wins once k ceil(log2 P) > P; b_trig is charged fired or not.
    acc = Accounting(**{**PAPER_ACCOUNTING, "b_trig": 1})
    assert model_link_bits(True, 100, 1000, acc)["positions"] == 1000
    assert model_link_bits(False, 0, 1000, acc) == {"values": 0, "positions": 0, "scale": 0,
                                                    "header": 0, "trigger": 1}
    # k = 0 (s == 0 with theta = 0): scale and header are still charged, as eq. (18) reads.
    assert sum(model_link_bits(True, 0, 1000, PAPER).values()) == 64
    # Dense message (identity compressor): no positions, no scale; no-quantisation b_q = 32.
    dense = Accounting.from_mapping({}, b_q=32)
    assert model_link_bits(True, 1000, 1000, dense, sparse=False, quantized=False) == \
        {"values": 32_000, "positions": 0, "scale": 0, "header": 32, "trigger": 0}
    skip = Accounting.from_mapping({"dense_skip_mask": True})
    assert model_link_bits(True, 1000, 1000, skip)["positions"] == 0
    # Whole network: ring of 3, two senders.
    assert model_network_bits({0: 2, 1: 2, 2: 2}, {0: True, 1: False, 2: True},
                              {0: 5, 1: 0, 2: 3}, 1000, PAPER) == \
        2 * (5 * 8 + 50 + 64) + 2 * (3 * 8 + 30 + 64)


@pytest.mark.parametrize("vector", ["random", "ties", "one", "zero"])
def test_formula_agrees_with_the_compressors_own_count(vector: str) -> None:
    size = 2762
    gen = torch.Generator().manual_seed(3)
    v = {"random": torch.randn(size, generator=gen),
         "ties": torch.ones(size),
         "one": torch.zeros(size).index_fill_(0, torch.tensor([17]), -2.5),
         "zero": torch.zeros(size)}[vector]
    comp = build_compressor(DEFAULT_COMPRESSOR)
    c = comp.compress(v)
    assert c.k == min(28, int((v != 0).sum()))
    mine = model_link_bits(True, c.k, size, PAPER, sparse=True, quantized=c.quantized)
    theirs = formula_bits(c, 8, 32)
    assert {key: mine[key] for key in theirs} == theirs
    # The wire never carries more than the formula charges (rounded up to bytes).
    assert c.payload_bytes <= math.ceil(sum(mine.values()) / 8) + 1


def test_accounting_defaults_follow_the_compressor() -> None:
    assert value_bits(build_compressor(DEFAULT_COMPRESSOR)) == 8
    assert value_bits(build_compressor({"type": "topk", "ratio": 0.01})) == 32
    assert value_bits(build_compressor({"type": "uniform", "bits": 4})) == 4
    assert value_bits(build_compressor({"type": "identity"})) == 32
    acc = Accounting.from_mapping({"b_hdr": 0}, b_q=4)
    assert (acc.b_q, acc.b_scale, acc.b_loss, acc.b_hdr, acc.b_trig) == (4, 32, 32, 0, 0)
    with pytest.raises(ValueError, match="unknown keys"):
        Accounting.from_mapping({"b_header": 1})
    with pytest.raises(ValueError, match="b_loss"):
        Accounting.from_mapping({"b_loss": -1})


def test_defaults_file_is_the_papers_algorithm_on_fmnist() -> None:
    config = resolve_config("dmfl-sq", None, {}, ())
    assert (config["dataset"], config["partition"], config["eval_split"]) == \
        ("fmnist", "dirichlet:0.5", "local")
    cfg = DMFLSQConfig.from_hyper(config["hyper"])
    assert (cfg.lr, cfg.alpha, cfg.rho, cfg.theta0, cfg.trigger) == \
        (0.1, 0.4, 0.5, 0.5, "inv_sqrt_t")
    assert (cfg.batch_sel, cfg.batch_grad, cfg.k_psi, cfg.a_ij, cfg.tie_break) == \
        (32, 32, None, "unit", "larger_id")
    assert cfg.compressor == DEFAULT_COMPRESSOR


def test_cifar10_config_is_the_papers_setting() -> None:
    cifar = defaults_file("dmfl-sq").with_name("dmfl-sq-cifar10.yaml")
    config = resolve_config("dmfl-sq", cifar, {}, ())
    assert (config["dataset"], config["partition"], config["eval_split"], config["rounds"]) == \
        ("cifar10", "dirichlet:0.1:64", "local", 500)
    assert config["model"] == {"name": "dmflsq-cnn"}
    cfg = DMFLSQConfig.from_hyper(config["hyper"])
    assert (cfg.lr, cfg.alpha, cfg.rho, cfg.theta0) == (0.1, 0.4, 0.5, 0.5)
    # The paper's omega = (k/P)(1 - k / (2 (2^8 - 1)^2)) ~ 8.37e-3 for its CNN (P = 2,122,186).
    size = sum(p.numel() for p in build_model(config["model"], (3, 32, 32), 10, 0).parameters())
    k = build_compressor(cfg.compressor).max_k(size)
    assert (size, k) == (2_122_186, 21_222)
    assert k / size * (1 - k / (2 * 255**2)) == pytest.approx(8.37e-3, abs=5e-6)


@pytest.mark.parametrize(("hyper", "match"), [
    ({"theta": 0.5}, "unknown hyper-parameters"),
    ({"trigger": "sometimes"}, "trigger must be one of"),
    ({"lr": 0}, "lr must be"),
    ({"rho": -1}, "rho must be"),
    ({"k_psi": 0}, "k_psi must be"),
    ({"a_ij": "metropolis"}, "a_ij must be one of"),
    ({"tie_break": "random"}, "tie_break must be one of"),
    ({"batch_sel": 1.5}, "batch_sel must be"),
])
def test_bad_hyper_parameters_are_named(hyper: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        DMFLSQConfig.from_hyper(hyper)
    with pytest.raises(ValueError, match=match):
        DMFLSQ.check_hyper(hyper)


def test_check_hyper_reaches_the_compressor_and_the_accounting() -> None:
    DMFLSQ.check_hyper(resolve_config("dmfl-sq", None, {}, ())["hyper"])
    with pytest.raises(ValueError, match="ratio must be"):
        DMFLSQ.check_hyper({"compressor": {"type": "topk", "ratio": 2}})
    with pytest.raises(ValueError, match="accounting"):
        DMFLSQ.check_hyper({"accounting": {"b_idx": 3}})


def test_torch_threads_and_auto_are_accepted() -> None:
    cfg = DMFLSQConfig.from_hyper({"torch_threads": 1, "k_psi": "auto"})
    assert cfg.k_psi is None
    assert DMFLSQConfig.from_hyper({"k_psi": 3}).k_psi == 3
    assert np.isclose(DMFLSQConfig().theta0, 0.5)
