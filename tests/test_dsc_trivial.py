"""The trivial predictors that DSC's reproduction measures training against
(protocols/dsc/trivial.py): what each dense task scores without looking at an image."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.dsc.taskdata import IGNORE, TaskSet
from protocols.dsc.trivial import trivial_map, trivial_metrics


def labels(seg: list[list[list[int]]], dep: list[float]) -> TaskSet:
    seg_ = np.array(seg, dtype=np.int64)
    n, h, w = seg_.shape
    normals = np.zeros((n, 3, h, w), dtype=np.float32)
    normals[:, 2] = 1.0
    depth = np.array(dep, dtype=np.float32)[:, None, None, None] * np.ones((n, 1, h, w),
                                                                         dtype=np.float32)
    return TaskSet(np.zeros((n, 3, h, w), dtype=np.float32),
                   {"seg": seg_, "sn": normals, "dep": depth}, seg_classes=3)


def test_each_pixel_gets_its_most_frequent_class_and_the_scores_are_the_meters() -> None:
    train = labels([[[0, 1]], [[0, 1]], [[2, 1]]], [1.0, 2.0, 3.0])
    guess = trivial_map("seg", train.targets["seg"], 3)
    assert guess.shape == (3, 1, 2) and guess.argmax(axis=0).tolist() == [[0, 1]]
    test = labels([[[0, 1]], [[2, 2]]], [2.0, 4.0])
    scores = trivial_metrics(train, test)
    assert scores["seg"]["pacc"] == pytest.approx(50.0)
    assert scores["dep"]["abs"] == pytest.approx(1.0)  # the training mean, 2, against 2 and 4
    assert scores["sn"]["mean"] == pytest.approx(0.0, abs=1e-3)


def test_unlabelled_pixels_do_not_vote_and_a_median_map_answers_the_l1_tasks() -> None:
    seg = np.array([[[IGNORE, 1]], [[IGNORE, 1]], [[2, 1]]])
    assert trivial_map("seg", np.where(seg == IGNORE, -1, seg), 3).argmax(axis=0).tolist() == \
        [[2, 1]]
    heat = np.array([[[[0.0, 1.0]]], [[[0.0, 0.2]]], [[[0.9, 0.1]]]], dtype=np.float32)
    assert trivial_map("kp", heat, 3) == pytest.approx(np.array([[[0.0, 0.2]]]))
