"""The plan's data section: launcher-side validation and each node's train and eval splits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dfl_node.learning.datacache import DataError
from dfl_node.learning.shards import load_node_data
from dfl_node.settings.data_section import DataSection
from launcher.data.prepare import plan_section, prepare_data
from launcher.errors import LaunchError
from tests.harness import launch_ok

CONFIG: dict[str, Any] = {"dataset": "synthetic", "data_root": None, "partition": "shards:2",
                          "eval_split": "global", "seed": 3, "synthetic": {}}
IDS = [2, 5, 7, 11, 13]  # node ids need not be 0..n-1


def section(**changes: Any) -> DataSection:
    config = {**CONFIG, **changes}
    return plan_section({**config, **prepare_data(config, len(IDS))})


def test_synthetic_section_names_classes_shape_and_eval_size() -> None:
    assert prepare_data(CONFIG, 5) == {"num_classes": 10, "shape": [32], "eval_size": 2000}
    assert prepare_data({**CONFIG, "eval_size": 300})["eval_size"] == 300


def test_global_eval_is_one_fixed_subset_of_eval_size() -> None:
    data = section(eval_size=500)
    nodes = [load_node_data(data, IDS, i) for i in IDS]
    assert all(len(n.y_eval) == 500 for n in nodes)
    assert all(np.array_equal(n.x_eval, nodes[0].x_eval) for n in nodes)
    again = load_node_data(data, IDS, IDS[0])
    np.testing.assert_array_equal(again.x_eval, nodes[0].x_eval)
    other_seed = load_node_data(data.model_copy(update={"seed": 4}), IDS, IDS[0])
    assert not np.array_equal(other_seed.y_eval, nodes[0].y_eval)


def test_local_eval_follows_each_node_labels() -> None:
    data = section(eval_split="local")
    nodes = [load_node_data(data, IDS, i) for i in IDS]
    test_rows = np.concatenate([n.x_eval for n in nodes])
    assert len(np.unique(test_rows, axis=0)) == len(test_rows) == 2000  # disjoint, complete
    for n in nodes:
        assert set(n.y_eval.tolist()) == set(n.y_train.tolist())
        assert len(set(n.y_train.tolist())) == 2


def test_both_evaluates_on_the_own_split_and_keeps_the_global_subset() -> None:
    both = [load_node_data(section(eval_split="both"), IDS, i) for i in IDS]
    local = [load_node_data(section(eval_split="local"), IDS, i) for i in IDS]
    shared = load_node_data(section(), IDS, IDS[0])
    for b, own in zip(both, local, strict=True):
        assert np.array_equal(b.x_eval, own.x_eval) and np.array_equal(b.y_eval, own.y_eval)
        assert own.global_eval is None and b.global_eval is not None
        assert np.array_equal(b.global_eval[0], shared.x_eval)
        assert np.array_equal(b.global_eval[1], shared.y_eval)


def test_every_training_row_goes_to_one_node() -> None:
    nodes = [load_node_data(section(partition="dirichlet:0.5:20"), IDS, i) for i in IDS]
    rows = np.concatenate([n.x_train for n in nodes])
    assert len(np.unique(rows, axis=0)) == len(rows) == 4000


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"partition": "shards:1"}, "partition: shards:1 on 5 nodes covers only 5 of 10 classes"),
     ({"partition": "dirichlet:0.1:900"}, "partition: dirichlet:0.1: no draw"),
     ({"eval_split": "all"}, "eval_split: must be one of global, local, both"),
     ({"eval_size": 0}, "eval_size: must be a positive integer"),
     ({"eval_size": "all"}, "eval_size: must be a positive integer"),
     ({"dataset": "mnist"},
      "dataset: unknown dataset 'mnist' .known: synthetic, scenes, nyuv2, fmnist"),
     ({"synthetic": {"colours": 3}}, "synthetic: .*colours")],
)
def test_bad_data_options_are_launch_errors(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(LaunchError, match=message):
        prepare_data({**CONFIG, **changes}, len(IDS))


def test_real_dataset_without_prepared_data_is_a_node_error() -> None:
    with pytest.raises(DataError, match="prepare_data"):
        load_node_data(section().model_copy(update={"dataset": "fmnist"}), IDS, IDS[0])


def test_a_run_under_both_reports_each_split_as_its_own_run_would(tmp_path: Path) -> None:
    """Evaluation does not touch training, so the `both` run's two accuracies are those of the
    `local` and `global` runs of the same plan, node for node."""
    runs = {split: launch_ok(tmp_path / split, "rgg10", "d-psgd", "--transport", "inproc",
                             "--set", "rounds=2", "--set", "partition=shards:2",
                             "--set", f"eval_split={split}")
            for split in ("both", "local", "global")}
    rows = {split: {(r["node"], r["round"]): r for r in map(
        json.loads, (tmp_path / split / "metrics.jsonl").read_text().splitlines())}
        for split in runs}
    assert rows["both"].keys() == rows["local"].keys() == rows["global"].keys()
    for key, row in rows["both"].items():
        assert row["accuracy"] == rows["local"][key]["accuracy"]
        assert row["global_accuracy"] == rows["global"][key]["accuracy"]
        assert row["global_loss"] == rows["global"][key]["loss"]
        assert "global_accuracy" not in rows["local"][key]
    both, local, glob = runs["both"], runs["local"], runs["global"]
    assert both["avg_accuracy"] == local["avg_accuracy"]
    assert "global_eval" not in local and "global_eval" not in glob
    for key in ("avg_accuracy", "worst_accuracy", "bottom10_accuracy", "jain_index",
                "cvar10_loss"):
        assert both["global_eval"][key] == pytest.approx(glob[key], rel=1e-12)
