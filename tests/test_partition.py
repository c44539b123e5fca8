"""Partitioners: exactly-once assignment, the SSD-FL slot scheme, Dirichlet's minimum, seeds."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from dfl_config.problems import one_line
from dfl_node.learning.partition import PartitionError, partition, split_like
from dfl_node.learning.seeds import numpy_stream
from dfl_node.settings.partition import (
    DirichletPartition,
    GivenPartition,
    IidPartition,
    ParsedPartition,
    ShardsPartition,
    parse_partition,
)
from launcher.config.run_settings import run_config_model

SPECS = ["iid", "shards:1", "shards:2", "shards:3", "shards:5:ordered", "dirichlet:0.1",
         "dirichlet:0.5:10"]


def split(spec: str, labels: np.ndarray, parts: int, seed: int) -> list[np.ndarray]:
    """The parts of a `--partition` string, parsed as a config or plan parses it."""
    return partition(parse_partition(spec), labels, parts, seed)


@pytest.fixture(scope="module")
def labels() -> np.ndarray:
    """12000 samples, 1200 per class, in shuffled order (like a real training set)."""
    return numpy_stream(1, -1, "test-labels").permutation(np.repeat(np.arange(10), 1200))


@pytest.fixture(scope="module")
def test_labels() -> np.ndarray:
    return numpy_stream(2, -1, "test-labels").permutation(np.repeat(np.arange(10), 100))


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("parts", [20, 30])
def test_every_training_sample_is_assigned_exactly_once(labels: np.ndarray, spec: str,
                                                        parts: int) -> None:
    shards = split(spec, labels, parts, seed=7)
    assert len(shards) == parts
    assert all(np.all(np.diff(s) > 0) for s in shards)  # sorted, no repeats within a node
    np.testing.assert_array_equal(np.sort(np.concatenate(shards)), np.arange(len(labels)))


def test_shards_1_gives_each_node_one_label_in_equal_shares(labels: np.ndarray) -> None:
    shards = split("shards:1", labels, 20, seed=3)
    held = [np.unique(labels[s]) for s in shards]
    assert all(len(h) == 1 for h in held)
    assert sorted(int(h[0]) for h in held) == sorted(list(range(10)) * 2)
    assert {len(s) for s in shards} == {600}


def test_shards_3_follows_the_slot_scheme(labels: np.ndarray) -> None:
    shards = split("shards:3", labels, 20, seed=3)
    for s in shards:
        held = np.unique(labels[s])
        assert len(held) == 3
        # three consecutive classes mod 10: {d*3, d*3+1, d*3+2} for some device d
        assert any({(3 * d + t) % 10 for t in range(3)} == set(held.tolist())
                   for d in range(20))
        assert np.bincount(labels[s], minlength=10)[held].tolist() == [200, 200, 200]


def test_shards_permutation_decides_which_node_is_which_device(labels: np.ndarray) -> None:
    a = [tuple(np.unique(labels[s])) for s in split("shards:1", labels, 20, seed=1)]
    b = [tuple(np.unique(labels[s])) for s in split("shards:1", labels, 20, seed=2)]
    assert sorted(a) == sorted(b) and a != b


def test_ordered_shards_give_node_d_device_ds_classes_for_every_seed(labels: np.ndarray) -> None:
    """ClippedGossip's dumbbell is built around `shards:5:ordered`: the even positions hold
    digits 0-4 and the odd ones 5-9, whatever the seed; the samples still follow the seed."""
    for seed in (0, 1):
        held = [set(np.unique(labels[s]).tolist()) for s in split("shards:5:ordered", labels,
                                                                   20, seed)]
        assert held == [set(range(5)) if d % 2 == 0 else set(range(5, 10)) for d in range(20)]
    assert not np.array_equal(split("shards:5:ordered", labels, 20, 0)[0],
                              split("shards:5:ordered", labels, 20, 1)[0])


@pytest.mark.parametrize(("spec", "minimum"), [("dirichlet:0.1", 64), ("dirichlet:0.1:200", 200),
                                               ("dirichlet:0.05:50", 50)])
def test_dirichlet_respects_the_minimum_size(labels: np.ndarray, spec: str, minimum: int) -> None:
    sizes = [len(s) for s in split(spec, labels, 20, seed=11)]
    assert min(sizes) >= minimum
    assert max(sizes) > 3 * min(sizes)  # still skewed, not an equal split


def test_dirichlet_alpha_controls_label_skew(labels: np.ndarray) -> None:
    def top_share(alpha: str) -> float:
        shards = split(f"dirichlet:{alpha}:1", labels, 20, seed=5)
        return float(np.mean([np.bincount(labels[s]).max() / len(s) for s in shards]))

    assert top_share("0.1") > 0.5
    assert top_share("100") < 0.25


@pytest.mark.parametrize(("spec", "parts", "minimum"),
                         [("dirichlet:0.1:500", 20, 500), ("dirichlet:0.1", 100, 64)])
def test_dirichlet_unreachable_minimum_is_an_error(labels: np.ndarray, spec: str, parts: int,
                                                   minimum: int) -> None:
    with pytest.raises(PartitionError, match=f"at least {minimum} samples"):
        split(spec, labels, parts, seed=0)


@pytest.mark.parametrize("spec", SPECS)
def test_partitions_are_deterministic_per_seed(labels: np.ndarray, spec: str) -> None:
    a, b = split(spec, labels, 20, seed=4), split(spec, labels, 20, seed=4)
    c = split(spec, labels, 20, seed=5)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert any(not np.array_equal(x, y) for x, y in zip(a, c, strict=True))


@pytest.mark.parametrize(
    ("spec", "parts", "message"),
    [("random", 20, "unknown partition"), ("iid:2", 20, "unknown partition"),
     ("shards:x", 20, "whole number"), ("shards:0", 20, "1 to 10"), ("shards:11", 20, "1 to 10"),
     ("shards:1", 5, "covers only 5 of 10"), ("dirichlet:0", 20, "positive"),
     ("dirichlet:nan", 20, "positive"), ("dirichlet:0.1:-3", 20, "whole number"),
     ("iid", 0, "into 0 parts"), ("given", 20, "only for arrays handed over one set per node")],
)
def test_bad_specs_are_errors(labels: np.ndarray, spec: str, parts: int, message: str) -> None:
    with pytest.raises(PartitionError, match=message):
        split(spec, labels, parts, seed=0)


@pytest.mark.parametrize("spec", SPECS)
def test_local_test_splits_follow_the_train_label_distribution(
        labels: np.ndarray, test_labels: np.ndarray, spec: str) -> None:
    train = split(spec, labels, 20, seed=9)
    local = split_like(train, labels, test_labels, seed=9)
    joined = np.concatenate(local)
    assert len(np.unique(joined)) == len(joined) == len(test_labels)  # disjoint and complete
    for tr, te in zip(train, local, strict=True):
        # test share of class k = train share of class k (1200 train vs 100 test per class)
        expected = np.bincount(labels[tr], minlength=10) / 12
        assert np.all(np.abs(np.bincount(test_labels[te], minlength=10) - expected) <= 1)


def test_shards_1_local_split_holds_only_the_node_label(labels: np.ndarray,
                                                        test_labels: np.ndarray) -> None:
    train = split("shards:1", labels, 20, seed=2)
    for tr, te in zip(train, split_like(train, labels, test_labels, seed=2), strict=True):
        assert set(test_labels[te].tolist()) == set(labels[tr].tolist())
        assert len(te) == 50  # each class's 100 test samples shared by its 2 holders


@pytest.mark.parametrize(("spec", "parsed"), [
    ("iid", IidPartition()), ("shards:2", ShardsPartition(per_node=2)),
    ("shards:02", ShardsPartition(per_node=2)), ("dirichlet:0.1", DirichletPartition(alpha=0.1)),
    ("dirichlet:0.10:64", DirichletPartition(alpha=0.1, min_size=64)),
    ("dirichlet:1e-1", DirichletPartition(alpha=0.1)), ("given", GivenPartition()),
])
def test_a_spec_parses_to_its_type_and_writes_back_its_own_spelling(
        spec: str, parsed: ParsedPartition) -> None:
    """A plan keeps the user's spelling, so its bytes and section hashes do not change."""
    value = parse_partition(spec)
    assert type(value) is type(parsed) and value.model_dump() == parsed.model_dump()
    assert str(value) == spec


def test_a_dirichlet_spec_without_a_minimum_takes_the_default_one() -> None:
    spec = parse_partition("dirichlet:0.5")
    assert isinstance(spec, DirichletPartition) and spec.min_size is None and spec.minimum == 64
    assert str(DirichletPartition(alpha=0.5, min_size=10)) == "dirichlet:0.5:10"


@pytest.mark.parametrize(("key", "value", "words"), [
    ("partition", "dirichlet:0.x", "partition: partition 'dirichlet:0.x': alpha '0.x' must be "
                                   "a positive number"),
    ("partition", 7, "partition: must be a partition string"),
    ("eval_split", "glbal", "eval_split: input should be 'global', 'local' or 'both', got 'glbal'"),
])
def test_the_run_config_refuses_a_bad_partition_or_split_in_one_line(
        key: str, value: object, words: str) -> None:
    """`partition` and `eval_split` are the plan's own types in the user's config too, so a
    misspelt one is refused where every other key is, not first at planning."""
    model = run_config_model("d-psgd")
    with pytest.raises(ValidationError) as caught:
        model.model_validate({key: value})
    line = one_line(caught.value, model)
    assert line.startswith(words) and line.count("dirichlet:0.x") <= 1


def test_the_run_config_keeps_a_partitions_spelling() -> None:
    config = run_config_model("d-psgd").model_validate({"partition": "dirichlet:0.10"})
    assert isinstance(config.partition, DirichletPartition) and config.partition.alpha == 0.1
    assert config.model_dump()["partition"] == "dirichlet:0.10"
    assert run_config_model("d-psgd").model_validate({}).model_dump()["partition"] == "iid"
