"""The shipped ring-of-20 attack sweep (bench/sweeps/robust-ring20.yaml) says what its note in
docs/protocols/robust.md claims it runs: every arm resolves as a run would, and the arms are the
attacks against the rules, with the two adversaries placed apart or side by side, three seeds
each. Nothing is run."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from bench.robust_ring20 import baseline_of, grouped, table
from bench.sweeps import load
from launcher.config.inputs import resolve_inputs
from launcher.sweep.grid import checked

CG = {"rule": "clipped-gossip", "tau": None, "delta": 0.33}
CG_TAU = {"rule": "clipped-gossip", "tau": 0.1, "delta": None}
TM = {"rule": "trimmed-mean", "b": 1}
MEAN = {"rule": "mean"}


def arms() -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """Variant name -> (seed, resolved config) of each of its runs."""
    sweep = checked(load("robust-ring20"))
    assert sweep.largest == 20
    out: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for point in sweep.points:
        assert Path(point.topology).stem == "ring20"
        _, config = resolve_inputs(point.request)
        out[point.variant.name].append((point.seed, config))
    return out


def test_the_sweep_expands_to_each_attack_against_each_rule_three_seeds_each() -> None:
    by_arm = arms()
    attacks = {"sign-flip": {"kind": "sign-flip"},
               "alie": {"kind": "alie", "z": None, "sees": "previous-round"},
               "alie-z10": {"kind": "alie", "z": 10.0, "sees": "previous-round"},
               "backdoor": {"kind": "backdoor", "target": 0, "fraction": 0.5, "size": 3}}
    rules = {"mean": MEAN, "clipped-gossip": CG, "trimmed-mean": TM}
    apart, adjacent = [0, 10], [0, 1]
    Arm = tuple[Any, Any, list[int] | None]  # behaviour, aggregation, adversary nodes
    expected: dict[str, Arm] = {
        "no-attack": (None, MEAN, None), "no-attack-clipped-gossip": (None, CG, None),
        "no-attack-clipped-gossip-tau": (None, CG_TAU, None),
        "no-attack-trimmed-mean": (None, TM, None)}
    for placement, placed in (("", apart), ("-adjacent", adjacent)):
        expected |= {f"{attack}{placement}-{rule}": (behaviour, aggregation, placed)
                     for attack, behaviour in attacks.items()
                     for rule, aggregation in rules.items()}
        expected |= {f"{attack}{placement}-clipped-gossip-tau": (attacks[attack], CG_TAU, placed)
                     for attack in ("sign-flip", "alie-z10")}
    iid: dict[str, Arm] = {"no-attack-iid": (None, MEAN, None),
                           "no-attack-trimmed-mean-iid": (None, TM, None),
                           "no-attack-clipped-gossip-iid": (None, CG, None)}
    for placement, placed in (("", apart), ("-adjacent", adjacent)):
        iid |= {f"sign-flip{placement}-{rule}-iid": (attacks["sign-flip"], aggregation, placed)
                for rule, aggregation in rules.items()}
    iid |= {f"alie-z10-{rule}-iid": (attacks["alie-z10"], aggregation, apart)
            for rule, aggregation in rules.items()}
    ls10: dict[str, Arm] = {"no-attack-ls10": (None, MEAN, None)} | {
        f"{attack}-{rule}-ls10": (attacks[attack], aggregation, apart)
        for attack in ("sign-flip", "alie-z10") for rule, aggregation in rules.items()}
    assert set(by_arm) == set(expected) | set(iid) | set(ls10)
    for name, (behaviour, aggregation, nodes) in (expected | iid | ls10).items():
        runs = by_arm[name]
        assert [seed for seed, _ in runs] == [0, 1, 2], name
        for _, config in runs:
            assert (config["protocol"], config["dataset"], config["model"]["name"]) == (
                "d-psgd", "fmnist", "mlp")
            assert config["partition"] == ("iid" if name in iid else "dirichlet:0.5"), name
            assert config["hyper"]["local_steps"] == (10 if name in ls10 else 1), name
            assert config["hyper"]["aggregation"] == aggregation, name
            adversaries = config["adversaries"]
            if behaviour is None:
                assert adversaries["nodes"] is None and adversaries["behaviour"] == [], name
            else:
                assert adversaries["nodes"] == nodes, name
                assert adversaries["behaviour"] == [behaviour], name


def test_the_arms_differ_only_in_their_adversaries_and_rule() -> None:
    """The attack-free run on the same shards is the baseline of every arm: nothing else may
    differ."""
    by_arm = arms()
    def rest(config: dict[str, Any]) -> dict[str, Any]:
        hyper = {k: v for k, v in config["hyper"].items() if k != "aggregation"}
        return {**{k: v for k, v in config.items() if k not in ("adversaries", "hyper")},
                "hyper": hyper}
    for name, runs in by_arm.items():
        baseline = dict(by_arm[baseline_of(name)])
        suffix = next((s for s in ("-iid", "-ls10") if name.endswith(s)), "")
        assert baseline_of(name) == f"no-attack{suffix}"
        for seed, config in runs:
            assert rest(config) == rest(baseline[seed]), name


def test_the_note_table_pairs_each_arm_with_the_attack_free_run_of_its_seed() -> None:
    """A defence 3 points below the baseline on every seed is within 5 points; one 10 below is
    not; an arm's seeds are paired with the baseline's, not averaged apart."""
    def seeds(*accs: float) -> dict[int, dict[str, float | None]]:
        return {s: {"avg_accuracy": a, "worst_accuracy": a - 0.1, "consensus_distance": 1.0,
                    "backdoor_asr": None} for s, a in enumerate(accs)}
    rows = {r["arm"]: r for r in table({"no-attack": seeds(0.70, 0.80, 0.75),
                                        "close": seeds(0.67, 0.77, 0.72),
                                        "far": seeds(0.60, 0.70, 0.65)})}
    assert rows["close"]["vs_attack_free"] == pytest.approx([-0.03, 0.0], abs=1e-9)
    assert rows["close"]["within_5_points"] and not rows["far"]["within_5_points"]
    assert rows["no-attack"]["avg_accuracy"][0] == pytest.approx(0.75)
    assert "vs_attack_free" not in rows["no-attack"] and rows["far"]["backdoor_asr"] is None


def test_an_iid_arm_is_paired_with_the_attack_free_run_on_iid_shards() -> None:
    def seeds(*accs: float) -> dict[int, dict[str, float | None]]:
        return {s: {"avg_accuracy": a, "worst_accuracy": a, "consensus_distance": 1.0,
                    "backdoor_asr": None} for s, a in enumerate(accs)}
    rows = {r["arm"]: r for r in table({"no-attack": seeds(0.60, 0.60, 0.60),
                                        "no-attack-iid": seeds(0.80, 0.80, 0.80),
                                        "attacked-iid": seeds(0.78, 0.78, 0.78)})}
    assert rows["attacked-iid"]["vs_attack_free"] == pytest.approx([-0.02, 0.0], abs=1e-9)
    assert "vs_attack_free" not in rows["no-attack-iid"]


def test_the_note_prints_each_arm_under_its_placement_and_data() -> None:
    def seeds() -> dict[int, dict[str, float | None]]:
        return {0: {"avg_accuracy": 0.7, "worst_accuracy": 0.6, "consensus_distance": 1.0,
                    "backdoor_asr": None}}
    arms = ["no-attack", "sign-flip-mean", "sign-flip-adjacent-mean", "no-attack-iid",
            "sign-flip-adjacent-mean-iid", "no-attack-ls10", "sign-flip-mean-ls10"]
    text = grouped(table({arm: seeds() for arm in arms}))
    apart, adjacent, iid, ls10 = text.split("\n\n")[1::2]
    def named(block: str) -> list[str]:
        return [line.split(" | ")[0].removeprefix("| ") for line in block.splitlines()[2:]]
    assert named(apart) == ["no-attack", "sign-flip-mean"]
    assert named(adjacent) == ["no-attack", "sign-flip-adjacent-mean"]
    assert named(iid) == ["no-attack-iid", "sign-flip-adjacent-mean-iid"]
    assert named(ls10) == ["no-attack-ls10", "sign-flip-mean-ls10"]
