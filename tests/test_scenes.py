"""SynthScenes, task portfolios and per-node splits (docs/protocols/dsc.md#mini-run, #a8)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest

from protocols.dsc.dataset_options import SceneOptions
from protocols.dsc.portfolios import draw_portfolios, node_portfolios
from protocols.dsc.scenes import eval_pool, node_scenes, normals_from_depth
from protocols.dsc.taskdata import TASKS, TaskSet, dirichlet_sizes, node_share
from protocols.dsc.workload import scene_options

SPEC = SceneOptions(size=16, train_size=120, test_size=20, min_size=10)
SEED = 7
IDS = [0, 3, 5]


def digest(spec: SceneOptions, node: int, seed: int = SEED) -> str:
    train, test = node_scenes(spec, seed, IDS, node, TASKS)
    h = hashlib.sha256()
    for part in (train, test):
        h.update(part.images.tobytes())
        for task in TASKS:
            h.update(part.targets[task].tobytes())
    return h.hexdigest()


def test_scenes_identical_across_processes() -> None:
    code = ("from tests.test_scenes import SPEC, digest; "
            "print(digest(SPEC, 3), digest(SPEC, 5))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [digest(SPEC, 3), digest(SPEC, 5)]
    assert out[0] != out[1]  # nodes render their own scenes
    assert digest(SPEC, 3, seed=8) != out[0]


def test_scene_labels_are_consistent() -> None:
    pool = eval_pool(SPEC, SEED)
    t = pool.targets
    assert pool.images.shape == (20, 3, 16, 16) and pool.images.dtype == np.float32
    assert set(np.unique(t["seg"])) <= set(range(5)) and len(np.unique(t["seg"])) > 2
    assert t["dep"].min() > 0
    # Sn is derived from Dep, exactly
    for k in range(3):
        np.testing.assert_allclose(t["sn"][k], normals_from_depth(t["dep"][k, 0].astype(
            np.float64)), atol=2e-3)
    np.testing.assert_allclose(np.linalg.norm(t["sn"], axis=1), 1.0, atol=1e-5)
    assert t["edge"].max(axis=(1, 2, 3)) == pytest.approx(np.ones(20))
    assert t["kp"].min() >= 0 and t["kp"].max() <= 1 and t["kp"].max() > 0.5


def test_normals_of_a_tilted_plane() -> None:
    y, x = np.mgrid[0:8, 0:8] / 8.0
    n = normals_from_depth(2.0 + 0.5 * x - 0.25 * y)
    expected = np.array([-0.5, 0.25, 1.0]) / np.linalg.norm([-0.5, 0.25, 1.0])
    np.testing.assert_allclose(n.reshape(3, -1).T, np.tile(expected, (64, 1)), atol=1e-12)


def test_pool_generation_is_fast() -> None:
    start = time.process_time()
    pool = eval_pool(SceneOptions(test_size=650), 0)
    assert len(pool) == 650 and pool.images.shape[2:] == (32, 32)
    assert time.process_time() - start < 5.0  # docs/protocols/dsc.md#mini-run


def test_quantity_skew_and_disjoint_shares() -> None:
    sizes = dirichlet_sizes(795, 10, 1.0, 30, seed=1)
    assert sizes.sum() == 795 and sizes.min() >= 30 and len(set(sizes.tolist())) > 5
    pool = TaskSet(np.arange(100, dtype=np.float32)[:, None],
                   {"dep": np.arange(100)[:, None]}, seg_classes=5)
    shares = [node_share(pool, [1, 2, 4], n, ("dep",), min_size=10, seed=3) for n in (1, 2, 4)]
    seen = np.concatenate([s.images[:, 0] for s in shares])
    assert sorted(seen.tolist()) == list(range(100))
    with pytest.raises(ValueError, match="exceed"):
        dirichlet_sizes(100, 4, 1.0, 30, seed=1)


def test_nyu_portfolios_follow_the_spec_multiset() -> None:
    drawn = draw_portfolios(list(range(10)), seed=4, scheme="nyu")
    holders = Counter(t for tasks in drawn.values() for t in tasks)
    assert holders == {"seg": 7, "sn": 7, "dep": 8}
    assert drawn == draw_portfolios(list(range(10)), seed=4, scheme="nyu")
    assert drawn != draw_portfolios(list(range(10)), seed=5, scheme="nyu")


def test_portfolios_from_node_attributes_and_taskonomy_draws() -> None:
    attrs = {0: {"tasks": ["dep", "seg"]}, 1: {}, 2: {"optimizer": "sgd"}}
    got = node_portfolios(attrs, seed=0, scheme="taskonomy")
    assert got[0] == ("seg", "dep")
    assert all(2 <= len(got[n]) <= 3 and set(got[n]) <= {"seg", "sn", "kp", "edge"}
               for n in (1, 2))
    with pytest.raises(ValueError, match=r"node 0: tasks\[1\]: input should be 'seg'"):
        node_portfolios({0: {"tasks": ["seg", "colour"]}}, seed=0, scheme="nyu")
    with pytest.raises(ValueError, match="node 1: tasks: must be distinct"):
        node_portfolios({0: {}, 1: {"tasks": ["seg", "seg"]}}, seed=0, scheme="nyu")
    with pytest.raises(ValueError, match="scheme"):
        draw_portfolios([0], seed=0, scheme="pascal")  # type: ignore[arg-type]


@pytest.mark.parametrize(("given", "says"), [
    ({"sise": 16}, "scenes.sise: unknown key (did you mean size?)"),
    ({"size": True}, "scenes.size: input should be a valid integer"),
    ({"train_size": 0}, "scenes.train_size: must be a positive integer"),
    ({"alpha": 0}, "scenes.alpha: must be > 0"),
    ({"portfolios": "pascal"}, "scenes.portfolios: input should be 'nyu' or 'taskonomy'"),
])
def test_scene_options_refuse_bad_keys_and_values(given: dict[str, object], says: str) -> None:
    with pytest.raises(ValueError) as info:
        scene_options(given)
    assert str(info.value).startswith(says), info.value
