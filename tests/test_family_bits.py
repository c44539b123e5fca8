"""Bits per client per round of the DMFL-SQ family on the paper's CIFAR-10 model, from the runs'
own ledgers, against the formulas (eqs. 18-19, docs/protocols/dmfl-sq.md#a17) computed here.

P = 2,122,186 (the CNN2+FC2 whose omega matches the paper), ring20 (deg 2, |E| = 20, K_Psi = 10).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.harness import ROOT, launch_ok

P = 2_122_186
DEG = 2
LOG2P = math.ceil(math.log2(P))  # 22
DATA = ROOT.parent / "shared" / "data"
CIFAR = ("--dataset", "cifar10", "--partition", "dirichlet:0.1:64", "--set", "eval_split=local",
         "--set", "model={name: dmflsq-cnn}", "--data-root", str(DATA), "--rounds", "1",
         "--transport", "inproc")


def eq18_link(k: int, b_q: int = 8, b_scale: int = 32, b_hdr: int = 32) -> int:
    return k * b_q + min(k * LOG2P, P) + b_scale + b_hdr


def one_round(tmp_path: Path, protocol: str, *extra: str) -> dict:
    return launch_ok(tmp_path / protocol, "ring20", protocol, *CIFAR, *extra)


@pytest.mark.slow
def test_bits_per_client_order_and_formulas(tmp_path: Path, cifar_archive: Path) -> None:
    dpsgd = one_round(tmp_path, "d-psgd", "--set", "local_steps=1")
    dsgt = one_round(tmp_path, "dsgt")
    choco = one_round(tmp_path, "choco-sgd")
    dmflsq = one_round(tmp_path, "dmfl-sq", "--config",
                       str(ROOT / "protocols" / "configs" / "dmfl-sq-cifar10.yaml"))

    assert dpsgd["bits_per_client"] == DEG * P * 32 == 135_819_904
    assert dsgt["bits_per_client"] == DEG * 2 * P * 32 == 271_639_808
    k_choco = math.ceil(0.1 * P)
    assert choco["bits_per_client"] == DEG * eq18_link(k_choco) == 7_640_004

    # DMFL-SQ: eq. (18) with each client's own trigger and k, plus eq. (19)'s 74 K_Psi |E| / n.
    rows = [json.loads(x) for x in (tmp_path / "dmfl-sq" / "metrics.jsonl").read_text().split("\n")
            if x]
    assert len(rows) == 20
    model_bits = sum(DEG * eq18_link(int(r["k"])) for r in rows if r["triggered"])
    psi = 2 * 10 * 20 * (32 + 5) / 20
    assert psi == 740
    assert dmflsq["bits_per_client"] == model_bits / 20 + psi
    assert any(r["triggered"] for r in rows)
    assert all(int(r["k"]) == math.ceil(0.01 * P) for r in rows if r["triggered"])

    order = [dmflsq, choco, dpsgd, dsgt]
    bits = [s["bits_per_client"] for s in order]
    assert bits == sorted(bits) and len(set(bits)) == 4
