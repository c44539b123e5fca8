"""The papers' experiments as data (bench/reproduce/papers/*.yaml) and the judge of their claims
(bench/reproduce/judge.py): every shipped file validates, and a claim's verdict follows the
95% intervals of planted measurements."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bench.reproduce.judge import Verdict, judge, trend
from bench.reproduce.paperdata import PAPERS, Check, Claim, Experiment, load_paper

SHIPPED = sorted(p.stem for p in PAPERS.glob("*.yaml"))


@pytest.mark.parametrize("paper", SHIPPED)
def test_every_shipped_paper_file_validates(paper: str) -> None:
    data = load_paper(paper)
    assert data.id == paper and data.experiments
    for experiment in data.experiments:
        assert experiment.reproducible or experiment.why_not
        for claim in experiment.claims:
            assert claim.check is not None or claim.why_unchecked


def test_a_claim_must_be_checkable_or_say_why_not() -> None:
    with pytest.raises(ValidationError, match="says why"):
        Claim(id="c", text="DMFL-SQ is fairer", where="Sec. VI")
    with pytest.raises(ValidationError, match="along"):
        Check(kind="trend", metric="delta_all", method="DSC")
    with pytest.raises(ValidationError, match="than"):
        Check(kind="higher", metric="avg_accuracy", method="DMFL-SQ")
    with pytest.raises(ValidationError, match="says why"):
        Experiment(id="table2", label="Table II", shows="s", where="w", dataset="MUSMET",
                   reproducible=False)


HIGHER = Check(kind="higher", metric="worst_accuracy", method="A", than=("B", "C"))


@pytest.mark.parametrize(("measured", "verdict"), [
    ({"A": [0.60, 0.61, 0.62], "B": [0.40, 0.41, 0.42], "C": [0.50, 0.50, 0.51]},
     Verdict.HOLDS),
    ({"A": [0.40, 0.41, 0.42], "B": [0.60, 0.61, 0.62], "C": [0.30, 0.31, 0.30]},
     Verdict.FAILS),  # one comparison the other way decides it
    ({"A": [0.50, 0.60, 0.55], "B": [0.52, 0.58, 0.50], "C": [0.30, 0.31, 0.30]},
     Verdict.UNRESOLVED),  # overlapping intervals
    ({"A": [0.90], "B": [0.10], "C": [0.10]}, Verdict.UNRESOLVED),  # one seed, no interval
    ({"A": [0.60, 0.61, 0.62], "B": [0.40, 0.41, 0.42]}, Verdict.UNRESOLVED),  # C not run
])
def test_a_comparison_is_judged_on_the_intervals(measured: dict, verdict: Verdict) -> None:
    assert judge(HIGHER, by_method=measured) == verdict


def test_lower_is_the_mirror_of_higher() -> None:
    lower = Check(kind="lower", metric="cvar10_loss", method="A", than=("B",))
    assert judge(lower, {"A": [1.0, 1.1, 1.0], "B": [2.0, 2.1, 2.0]}) == Verdict.HOLDS
    assert judge(lower, {"A": [2.0, 2.1, 2.0], "B": [1.0, 1.1, 1.0]}) == Verdict.FAILS


def test_trends_compare_the_ends_and_a_u_needs_a_low_middle() -> None:
    rising = {1: [0.1, 0.11, 0.1], 5: [0.3, 0.31, 0.3], 15: [0.5, 0.5, 0.51]}
    assert trend(rising, "rises") == Verdict.HOLDS
    assert trend(rising, "falls") == Verdict.FAILS
    assert trend(rising, "u-shaped") == Verdict.FAILS  # monotone, ends apart
    u = {1: [0.5, 0.51, 0.5], 5: [0.1, 0.11, 0.1], 15: [0.5, 0.5, 0.52]}
    assert trend(u, "u-shaped") == Verdict.HOLDS and trend(u, "peaks") == Verdict.UNRESOLVED
    peak = {x: [-v for v in values] for x, values in u.items()}
    assert trend(peak, "peaks") == Verdict.HOLDS and trend(peak, "u-shaped") == Verdict.UNRESOLVED
    assert trend(rising, "peaks") == Verdict.FAILS
    flat = {1: [0.5, 0.6, 0.4], 5: [0.5, 0.4, 0.6], 15: [0.55, 0.45, 0.5]}
    assert trend(flat, "rises") == trend(flat, "u-shaped") == Verdict.UNRESOLVED
    check = Check(kind="trend", metric="delta_all", method="DSC", along="J", direction="u-shaped")
    assert judge(check, along=u) == Verdict.HOLDS and judge(check) == Verdict.UNRESOLVED
