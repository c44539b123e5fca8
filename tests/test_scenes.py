"""SynthScenes, task portfolios and per-node splits (docs/protocols/dsc.md#mini-run, #a8)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest

from protocols.dsc.portfolios import draw_portfolios, node_portfolios
from protocols.dsc.scenes import SceneSpec, eval_pool, node_scenes, normals_from_depth
from protocols.dsc.taskdata import TASKS, TaskSet, dirichlet_sizes, node_share

SPEC = SceneSpec(size=16, train_size=120, test_size=20, min_size=10, seed=7)
IDS = [0, 3, 5]


def digest(spec: SceneSpec, node: int) -> str:
    train, test = node_scenes(spec, IDS, node, TASKS)
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
    assert digest(SceneSpec(size=16, train_size=120, test_size=20, min_size=10, seed=8),
                  3) != out[0]


def test_scene_labels_are_consistent() -> None:
    pool = eval_pool(SPEC)
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
    pool = eval_pool(SceneSpec(test_size=650))
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
    drawn = draw_portfolios(list(range(10)), seed=4)
    holders = Counter(t for tasks in drawn.values() for t in tasks)
    assert holders == {"seg": 7, "sn": 7, "dep": 8}
    assert drawn == draw_portfolios(list(range(10)), seed=4)
    assert drawn != draw_portfolios(list(range(10)), seed=5)


def test_portfolios_from_node_attributes_and_taskonomy_draws() -> None:
    attrs = {0: {"tasks": ["dep", "seg"]}, 1: {}, 2: {"optimizer": "sgd"}}
    got = node_portfolios(attrs, seed=0, scheme="taskonomy")
    assert got[0] == ("seg", "dep")
    assert all(2 <= len(got[n]) <= 3 and set(got[n]) <= {"seg", "sn", "kp", "edge"}
               for n in (1, 2))
    with pytest.raises(ValueError, match="node 0"):
        node_portfolios({0: {"tasks": ["seg", "colour"]}}, seed=0)
    with pytest.raises(ValueError, match="scheme"):
        draw_portfolios([0], seed=0, scheme="pascal")
