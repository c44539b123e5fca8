"""Our value beside each of a paper's numbers (bench/reproduce/outputs.py `ours_for`): the arm
at the number's own point on the experiment's axes, or none, never an arm of another panel."""

from __future__ import annotations

from bench.reproduce.arms import Arm
from bench.reproduce.measures import Measured
from bench.reproduce.outputs import ours_for
from bench.reproduce.paperdata import load_paper


def arm(method: str, random_edge: str) -> Arm:
    return Arm(method, "d-psgd", "dumbbell", {"split": "non-iid", "bucketing": "no",
                                              "random_edge": random_edge})


def test_clippedgossip_fig4_numbers_take_the_arm_of_their_own_panel() -> None:
    """Fig. 4's medium recipe runs the non-iid panel (and ClippedGossip with a random edge):
    a lone Gossip arm must not stand beside the iid or bucketing numbers, and ClippedGossip's
    two arms each go to their own panel's number."""
    accuracy = {("Gossip", "no"): 0.61, ("ClippedGossip", "no"): 0.62, ("TM", "no"): 0.46,
                ("ClippedGossip", "yes"): 0.64}
    results = {arm(m, edge): [Measured({"avg_accuracy": a})] for (m, edge), a in accuracy.items()}
    numbers = load_paper("clippedgossip").experiment("fig4").numbers
    shown = {(n.method, n.condition.split(";")[0]): ours_for(n, results) for n in numbers
             if n.ours}
    by_panel = {(method.split(" (")[0], panel): value for (method, panel), value in shown.items()}
    assert by_panel[("Gossip", "non-iid")] == "61"
    assert by_panel[("ClippedGossip", "non-iid")] == "62"
    assert by_panel[("TM", "non-iid")] == "46"
    assert by_panel[("ClippedGossip", "non-iid + random edge")] == "64"
    others = {k: v for k, v in by_panel.items()
              if k not in {("Gossip", "non-iid"), ("ClippedGossip", "non-iid"), ("TM", "non-iid"),
                           ("ClippedGossip", "non-iid + random edge")}}
    assert len(others) == 11 and set(others.values()) == {""}, others
