"""The `aggregation:` setting (protocols/robust/aggregation_settings.py) and the SDK's
`robust_mix`: the mean is `mix` itself, every other rule is the pure rule of protocols/robust on
the flattened model (in the node's name order, whatever order the messages came in), a
neighbour that sent a NaN is dropped and counted, a clipping rule reports what it clipped, a
neighbourhood a rule cannot honour names the node, and bad settings are one line. Runs of
d-psgd with each rule: tests/test_robust_dpsgd.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from pydantic import TypeAdapter, ValidationError

from dfl_config.problems import one_line
from launcher.config.layers import resolve_config
from launcher.config.run_spec import Override
from protocols.capabilities import RobustAggregation
from protocols.declaration import ProtocolDeclaration
from protocols.gossip.declarations import DPSGD_SPEC, DPSGDHyper
from protocols.hyper import TrainingHyper
from protocols.robust.aggregation_settings import (
    DEFAULT_AGGREGATION,
    RULES,
    Aggregation,
    AggregationRule,
    ClippedGossipRule,
    KrumRule,
    MeanRule,
)
from protocols.robust.errors import RobustnessError
from protocols.robust.neighbourhood import from_row
from protocols.sdk import mix, robust_mix
from tests.harness import ROOT

ME = 2
ROW = {0: 0.2, 1: 0.3, 2: 0.25, 3: 0.25}  # node 2's row: itself and neighbours 0, 1, 3
SHAPES = {"b": (3,), "a": (2, 2)}  # not in sorted order: the node's own order rules


def model(seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {name: torch.randn(shape, generator=gen) for name, shape in SHAPES.items()}


def flat(m: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([m[name].reshape(-1) for name in SHAPES])


MINE = model(ME)
THEIRS = {j: model(j) for j in (3, 0, 1)}  # arrival order, not id order

SETTINGS: list[dict[str, Any]] = [
    {"rule": "median"}, {"rule": "trimmed-mean", "b": 1}, {"rule": "krum", "f": 0},
    {"rule": "multi-krum", "f": 0, "m": 3}, {"rule": "bridge", "b": 1},
    {"rule": "clipped-gossip", "tau": 0.5}, {"rule": "clipped-gossip", "delta": 0.3},
    {"rule": "self-centred-clipping", "tau": 0.5, "iterations": 3},
]


def rule(setting: dict[str, Any]) -> AggregationRule:
    validated: AggregationRule = TypeAdapter(Aggregation).validate_python(setting)
    return validated


def test_the_default_rule_is_the_mean_and_robust_mix_then_is_mix() -> None:
    assert DPSGDHyper().aggregation == DEFAULT_AGGREGATION == MeanRule()
    assert rule({}) == MeanRule()  # a mapping without `rule`
    got = robust_mix(DEFAULT_AGGREGATION, ROW, ME, MINE, THEIRS)
    want = mix(ROW, ME, MINE, THEIRS)
    assert list(got) == list(want)
    assert all(torch.equal(got[n], want[n]) for n in want)
    metrics: dict[str, float] = {}
    robust_mix(MeanRule(), ROW, ME, MINE, THEIRS, metrics)
    assert metrics == {}  # a run without a robust rule has the metrics it had


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: "-".join(map(str, s.values())))
def test_each_rule_is_the_pure_rule_on_the_flattened_model(setting: dict[str, Any]) -> None:
    chosen = rule(setting)
    got = robust_mix(chosen, ROW, ME, MINE, THEIRS)
    hood = from_row(ROW, ME, flat(MINE), {j: flat(m) for j, m in THEIRS.items()})
    want = chosen.aggregate(hood).vector
    assert list(got) == list(SHAPES)
    assert all(got[n].shape == SHAPES[n] for n in SHAPES)
    assert torch.equal(flat(got), want)
    in_id_order = robust_mix(chosen, ROW, ME, MINE, dict(sorted(THEIRS.items())))
    assert all(torch.equal(got[n], in_id_order[n]) for n in SHAPES)


def test_the_mean_rules_own_aggregate_is_the_rows_sum() -> None:
    hood = from_row(ROW, ME, flat(MINE), {j: flat(m) for j, m in THEIRS.items()})
    assert torch.allclose(MeanRule().aggregate(hood).vector, flat(mix(ROW, ME, MINE, THEIRS)))


def test_a_neighbour_that_sends_a_nan_is_dropped_and_counted() -> None:
    poisoned = {**THEIRS, 1: {n: t.clone() for n, t in THEIRS[1].items()}}
    poisoned[1]["a"][0, 1] = float("nan")
    metrics: dict[str, float] = {}
    got = robust_mix(rule({"rule": "median"}), ROW, ME, MINE, poisoned, metrics)
    without = robust_mix(rule({"rule": "median"}), {**ROW, 2: ROW[2] + ROW[1], 1: 0.0}, ME,
                         MINE, {j: m for j, m in THEIRS.items() if j != 1})
    assert metrics == {"dropped_nonfinite": 1}
    assert all(torch.equal(got[n], without[n]) and bool(got[n].isfinite().all()) for n in SHAPES)


def test_a_clipping_rule_reports_the_neighbours_it_clipped_and_its_radius() -> None:
    far = {**THEIRS, 3: {n: t * 1e3 for n, t in THEIRS[3].items()}}
    metrics: dict[str, float] = {}
    robust_mix(rule({"rule": "clipped-gossip", "delta": 0.25}), ROW, ME, MINE, far, metrics)
    distances = sorted(float((flat(far[j]) - flat(MINE)).norm()) for j in far)
    assert metrics["clipped_neighbours"] == 1 and metrics["dropped_nonfinite"] == 0
    assert metrics["radius"] == pytest.approx(distances[-2], rel=1e-6)  # the next farthest
    robust_mix(rule({"rule": "clipped-gossip", "tau": 1e9}), ROW, ME, MINE, far, metrics)
    assert metrics["clipped_neighbours"] == 0 and metrics["radius"] == 1e9


def test_a_neighbourhood_the_rule_cannot_honour_names_the_node() -> None:
    """Krum with f = 1 needs 5 vectors: the row's 4 (a neighbour lost, as under --on-failure
    continue, leaves 3) are too few."""
    lost = {j: m for j, m in THEIRS.items() if j != 3}
    with pytest.raises(RobustnessError, match=r"^node 2: aggregation krum: Krum: f = 0 "):
        robust_mix(KrumRule(f=0), {0: 0.5, 2: 0.5}, ME, MINE, lost)
    with pytest.raises(RobustnessError, match=r"^node 2: aggregation krum: Krum: f = 1 .*"
                                              r"among 3 vectors"):
        robust_mix(KrumRule(f=1), ROW, ME, MINE, lost)


@pytest.mark.parametrize(("setting", "said"), [
    ({"rule": "krum"}, "hyper.aggregation.f: field required"),
    ({"rule": "trimmed-mean", "b": -1}, "hyper.aggregation.b: must be >= 0, got -1"),
    ({"rule": "multi-krum", "f": 1, "m": 0}, "hyper.aggregation.m: must be a positive integer"),
    ({"rule": "clipped-gossip"}, "hyper.aggregation: clipped-gossip takes tau (a fixed radius) "
                                 "or delta"),
    ({"rule": "clipped-gossip", "tau": 1, "delta": 0.5}, "exactly one of them"),
    ({"rule": "clipped-gossip", "delta": 1.5}, "hyper.aggregation.delta: must be <= 1"),
    ({"rule": "self-centred-clipping", "tau": 0.5, "iterations": 0},
     "hyper.aggregation.iterations: must be a positive integer"),
    ({"rule": "krum", "f": 1, "b": 1}, "hyper.aggregation.b: unknown key"),
    ({"rule": "mode"}, "hyper.aggregation.rule: unknown 'mode' (known: 'mean', 'median',"),
])
def test_bad_settings_are_one_line(setting: dict[str, Any], said: str) -> None:
    adapter = TypeAdapter(Aggregation)
    with pytest.raises(ValidationError) as caught:
        adapter.validate_python(setting)
    line = one_line(caught.value, adapter.json_schema(), ("hyper", "aggregation"))
    assert said in line and "\n" not in line, line


def test_every_rule_is_in_the_union_once_and_d_psgd_declares_the_capability() -> None:
    tags = [cls.model_fields["rule"].default for cls in RULES]
    assert len(set(tags)) == len(tags) == 8
    assert isinstance(DPSGD_SPEC.capability(RobustAggregation), RobustAggregation)
    assert ClippedGossipRule(delta=0.3).rule == "clipped-gossip"


def test_a_spec_declaring_robust_aggregation_needs_the_field() -> None:
    with pytest.raises(TypeError, match="TrainingHyper declares no `aggregation` field"):
        ProtocolDeclaration(TrainingHyper, capabilities=(RobustAggregation(),))


def test_the_settings_and_the_capability_import_no_torch() -> None:
    code = ("import sys; import protocols.robust.aggregation_settings, protocols.capabilities; "
            "from protocols.sdk import Aggregation, DEFAULT_AGGREGATION, RobustAggregation; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_a_later_layer_naming_another_rule_starts_it_afresh(tmp_path: Path) -> None:
    """A config file's rule with its parameters, then `--set` of another rule: the file's
    `tau` means nothing to the median. The same rule again keeps them (`--set
    aggregation.iterations=3` changes one)."""
    path = tmp_path / "robust.yaml"
    path.write_text("hyper:\n  aggregation: {rule: self-centred-clipping, tau: 0.5}\n")
    swapped = resolve_config("d-psgd", path, {}, [Override.parse("aggregation={rule: median}")])
    assert swapped["hyper"]["aggregation"] == {"rule": "median"}
    kept = resolve_config("d-psgd", path, {}, [Override.parse("aggregation.iterations=3")])
    assert kept["hyper"]["aggregation"] == {"rule": "self-centred-clipping", "tau": 0.5,
                                            "iterations": 3}
