"""DMFL-SQ's bit formula (eqs. 18-20) and its configuration, without running a mesh."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from dfl_config.problems import one_line
from dfl_node.learning.models import build_model
from launcher.config.layers import preset_file, resolve_config
from protocols.dmflsq.bits import (
    PAPER_ACCOUNTING,
    Accounting,
    ceil_log2,
    model_link_bits,
    model_network_bits,
    psi_link_bits,
    psi_network_bits,
    psi_pair_bits,
)
from protocols.dmflsq.declarations import DMFLSQHyper
from protocols.toolkit.compressor_configs import compressor_config

PAPER = Accounting.model_validate(PAPER_ACCOUNTING)
# The paper's C = Q8 o Top_k, k/P = 0.01, as `hyper.compressor` spells it.
PAPER_COMPRESSOR = {
    "sparsifier": {"type": "topk", "ratio": 0.01},
    "quantizer": {"type": "uniform", "bits": 8, "rounding": "nearest"},
}


def hyper_error(hyper: dict) -> str:
    """The launcher's line for a bad `hyper` (exit 2)."""
    with pytest.raises(ValidationError) as info:
        DMFLSQHyper.model_validate(hyper)
    return one_line(info.value, DMFLSQHyper, ("hyper",))


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
    assert psi_link_bits(k_psi, 20, PAPER) == k_psi * psi_pair_bits(20, PAPER) == k_psi * 37
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
    acc = Accounting.model_validate({**PAPER_ACCOUNTING, "b_trig": 1})
    assert model_link_bits(True, 100, 1000, acc)["positions"] == 1000
    assert model_link_bits(False, 0, 1000, acc) == {"values": 0, "positions": 0, "scale": 0,
                                                    "header": 0, "trigger": 1}
    # k = 0 (s == 0 with theta = 0): scale and header are still charged, as eq. (18) reads.
    assert sum(model_link_bits(True, 0, 1000, PAPER).values()) == 64
    # Dense message (identity compressor): no positions, no scale; no-quantisation b_q = 32.
    dense = Accounting(b_q=32)
    assert model_link_bits(True, 1000, 1000, dense, sparse=False, quantized=False) == \
        {"values": 32_000, "positions": 0, "scale": 0, "header": 32, "trigger": 0}
    skip = Accounting(b_q=8, dense_skip_mask=True)
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
    comp = compressor_config(PAPER_COMPRESSOR).build()
    c = comp.compress(v)
    assert c.k == min(28, int((v != 0).sum()))
    mine = model_link_bits(True, c.k, size, PAPER, sparse=True, quantized=c.quantized)
    assert c.payload(Accounting()).bits == mine  # what the message states, b_q its own (8)
    # The wire never carries more than the formula charges (rounded up to bytes).
    assert c.payload_bytes <= math.ceil(sum(mine.values()) / 8) + 1
    assert comp.largest_bits(size, Accounting()) == \
        sum(model_link_bits(True, 28, size, PAPER).values())


def test_accounting_defaults_follow_the_compressor() -> None:
    def bits_of(spec: dict) -> int:
        return compressor_config(spec).build().value_bits

    assert bits_of(PAPER_COMPRESSOR) == 8
    assert bits_of({"type": "topk", "ratio": 0.01}) == 32
    assert bits_of({"type": "uniform", "bits": 4}) == 4
    assert bits_of({"type": "identity"}) == 32
    acc = DMFLSQHyper.model_validate({"accounting": {"b_hdr": 0}}).accounting
    assert (acc.b_q, acc.b_scale, acc.b_loss, acc.b_hdr, acc.b_trig) == (None, 32, 32, 0, 0)
    c = compressor_config({"type": "uniform", "bits": 4}).build().compress(torch.ones(10))
    assert c.payload(acc).bits["values"] == 10 * 4  # b_q: the quantiser's
    assert hyper_error({"accounting": {"b_header": 1}}) == \
        "hyper.accounting.b_header: unknown key (did you mean b_hdr?)"
    assert hyper_error({"accounting": {"b_loss": -1}}) == \
        "hyper.accounting.b_loss: must be >= 0, got -1"


def test_run_defaults_are_the_papers_algorithm_on_fmnist() -> None:
    config = resolve_config("dmfl-sq", None, {}, ())
    assert (config["dataset"], config["partition"], config["eval_split"]) == \
        ("fmnist", "dirichlet:0.5", "local")
    cfg = DMFLSQHyper.model_validate(config["hyper"])
    assert (cfg.lr, cfg.alpha, cfg.rho, cfg.theta0, cfg.trigger) == \
        (0.1, 0.4, 0.5, 0.5, "inv_sqrt_t")
    assert (cfg.batch_sel, cfg.batch_grad, cfg.k_psi, cfg.a_ij, cfg.tie_break) == \
        (32, 32, "auto", "unit", "larger_id")
    assert cfg.compressor == compressor_config(PAPER_COMPRESSOR)
    assert cfg == DMFLSQHyper()  # the declaration sets none: the paper's are the model's defaults


def test_cifar10_config_is_the_papers_setting() -> None:
    cifar = preset_file("dmfl-sq-cifar10")
    config = resolve_config("dmfl-sq", cifar, {}, ())
    assert (config["dataset"], config["partition"], config["eval_split"], config["rounds"]) == \
        ("cifar10", "dirichlet:0.1:64", "local", 500)
    assert config["model"] == {"name": "dmflsq-cnn"}
    cfg = DMFLSQHyper.model_validate(config["hyper"])
    assert (cfg.lr, cfg.alpha, cfg.rho, cfg.theta0) == (0.1, 0.4, 0.5, 0.5)
    assert cfg == DMFLSQHyper()  # the paper's setting: the model's defaults
    # The paper's omega = (k/P)(1 - k / (2 (2^8 - 1)^2)) ~ 8.37e-3 for its CNN (P = 2,122,186).
    size = sum(p.numel() for p in build_model(config["model"], (3, 32, 32), 10, 0).parameters())
    k = cfg.compressor.build().max_k(size)
    assert (size, k) == (2_122_186, 21_222)
    assert k / size * (1 - k / (2 * 255**2)) == pytest.approx(8.37e-3, abs=5e-6)


@pytest.mark.parametrize(("hyper", "line"), [
    ({"theta": 0.5}, "hyper.theta: unknown key (did you mean theta0?)"),
    ({"trigger": "sometimes"},
     "hyper.trigger: input should be 'constant', 'inv_sqrt_t' or 'zero', got 'sometimes'"),
    ({"lr": 0}, "hyper.lr: must be > 0, got 0"),
    ({"rho": -1}, "hyper.rho: must be >= 0, got -1"),
    ({"k_psi": 0}, "hyper.k_psi: must be an integer >= 1 or auto, got 0"),
    ({"k_psi": "diameter"}, "hyper.k_psi: must be an integer >= 1 or auto, got 'diameter'"),
    ({"a_ij": "metropolis"},
     "hyper.a_ij: input should be 'unit' or 'from_topology', got 'metropolis'"),
    ({"tie_break": "random"},
     "hyper.tie_break: input should be 'larger_id' or 'smaller_id', got 'random'"),
    ({"batch_sel": 1.5}, "hyper.batch_sel: input should be a valid integer, got 1.5"),
    ({"skip_consensus_when_rho0": 1}, "hyper.skip_consensus_when_rho0: input should be a valid "
                                      "boolean, got 1"),
    ({"compressor": {"type": "topk", "ratio": 2}},
     "hyper.compressor.ratio: must be a number in (0, 1], got 2"),
    ({"compressor": {"sparsifier": {"type": "topq", "k": 3}}},
     "hyper.compressor.sparsifier.type: unknown 'topq' (did you mean topk?) "
     "(known: 'topk', 'randk')"),
    ({"accounting": {"b_idx": 3}}, "hyper.accounting.b_idx: unknown key (did you mean b_hdr?)"),
])
def test_bad_hyper_parameters_are_one_named_line(hyper: dict, line: str) -> None:
    assert hyper_error(hyper) == line


def test_torch_threads_and_auto_are_accepted() -> None:
    cfg = DMFLSQHyper.model_validate({"torch_threads": 1, "k_psi": "auto"})
    assert cfg.k_psi == "auto" and cfg.torch_threads == 1
    assert DMFLSQHyper.model_validate({"k_psi": None}).k_psi == "auto"  # the older spelling
    assert DMFLSQHyper.model_validate({"k_psi": 3}).k_psi == 3
    assert np.isclose(DMFLSQHyper().theta0, 0.5)
    # What the launcher hands the nodes validates back to the same settings.
    for hyper in ({}, {"k_psi": 4, "compressor": {"type": "identity"}},
                  {"compressor": {"quantizer": {"type": "uniform", "bits": 4}}}):
        cfg = DMFLSQHyper.model_validate(hyper)
        assert DMFLSQHyper.model_validate(cfg.as_dict()) == cfg
