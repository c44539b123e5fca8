"""Trigger thresholds and the non-strict firing rule (paper eq. 18: chi = 1{||s|| >= theta_t})."""

from __future__ import annotations

import math

import pytest

from protocols.toolkit.accounting import MessageAccounting
from protocols.toolkit.trigger import fires, silence, threshold


def test_schedules() -> None:
    assert [threshold("constant", 0.5, t) for t in (0, 1, 99)] == [0.5, 0.5, 0.5]
    assert [threshold("inv_sqrt_t", 0.5, t) for t in (0, 3, 99)] == [0.5, 0.25, 0.05]
    assert threshold("inv_sqrt_t", 0.5, 1) == 0.5 / math.sqrt(2)
    assert [threshold("zero", 0.5, t) for t in (0, 7)] == [0.0, 0.0]


def test_firing_is_non_strict() -> None:
    assert fires(0.25, 0.25)
    assert fires(0.0, threshold("zero", 1.0, 5))  # theta = 0: always send, even s = 0
    assert not fires(0.2499999, 0.25)
    assert not fires(float("nan"), 0.0)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("sqrt", 0.5, 0), "schedule"),
        (("constant", -0.1, 0), "theta0"),
        (("constant", float("inf"), 0), "theta0"),
        (("inv_sqrt_t", 0.5, -1), "round"),
        (("inv_sqrt_t", 0.5, 1.0), "round"),
        (("inv_sqrt_t", 0.5, True), "round"),
    ],
)
def test_bad_arguments(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        threshold(*args)


def test_silence_sends_nothing_and_costs_the_trigger_term() -> None:
    assert silence(MessageAccounting(b_trig=1)) == {"trigger": 1}
    assert silence(MessageAccounting()) == {"trigger": 0}  # b_trig = 0: silence is free (A13)
