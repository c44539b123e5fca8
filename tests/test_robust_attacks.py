"""The attacks (protocols/robust): model poisoning against hand-computed values and plain numpy
references, determinism given a generator, the data-poisoning transforms on real-shaped image
batches, and one clear error for parameters an attack cannot honour."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

from protocols.robust import poisoning
from protocols.robust.attacks import alie, alie_z, dissensus, gaussian, ipm, scaled, sign_flip
from protocols.robust.errors import RobustnessError


def vec(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def generator(seed: int) -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


def test_sign_flip_and_scaling_by_hand() -> None:
    assert torch.equal(sign_flip(vec(1, -2, 0)), vec(-1, 2, 0))
    assert torch.equal(scaled(vec(1, -2), -3.0), vec(-3, 6))


def test_gaussian_is_its_generator_and_nothing_else() -> None:
    centre = vec(1, 2, 3, 4)
    first, again = gaussian(centre, 0.5, generator(3)), gaussian(centre, 0.5, generator(3))
    assert torch.equal(first, again)
    assert not torch.equal(first, gaussian(centre, 0.5, generator(4)))
    assert torch.equal(first, centre + 0.5 * torch.randn(4, generator=generator(3)))
    assert torch.equal(gaussian(centre, 0.0, generator(3)), centre)


def test_alie_z_follows_the_papers_supporters() -> None:
    # n = 50, f = 24: s = 26 - 24 = 2 supporters, Phi(z) < 48/50 (scipy.stats.norm.ppf).
    assert math.isclose(alie_z(50, 24), 1.7506860712521692, rel_tol=1e-12)
    # n = 20, f = 2: s = 11 - 2 = 9, Phi(z) < 11/20.
    assert math.isclose(alie_z(20, 2), 0.12566134685507402, rel_tol=1e-12)


def test_alie_by_hand_and_against_numpy() -> None:
    honest = [vec(0, 0), vec(2, 4)]
    # mean [1, 2]; sample std [sqrt 2, sqrt 8]
    assert torch.allclose(alie(honest, 1.0), vec(1 - math.sqrt(2), 2 - math.sqrt(8)))
    gen = np.random.default_rng(0)
    rows = gen.normal(size=(5, 9)).astype(np.float32)
    expected = rows.astype(np.float64).mean(axis=0) - 1.3 * rows.astype(np.float64).std(
        axis=0, ddof=1)
    got = alie([torch.from_numpy(r) for r in rows], 1.3)
    assert np.allclose(got.numpy(), expected, atol=1e-5)


def test_ipm_by_hand() -> None:
    assert torch.equal(ipm([vec(1, 2), vec(3, 4)], 0.5), vec(-1, -1.5))
    mean = vec(2, 3)
    assert float(torch.dot(ipm([vec(1, 2), vec(3, 4)], 0.1), mean)) < 0


def test_dissensus_by_hand() -> None:
    # pull = 0.25 (1 - 0) + 0.25 (3 - 0) = 1; x_i - 1 * 1 / 0.5
    assert torch.equal(dissensus(vec(0), [vec(1), vec(3)], [0.25, 0.25], 0.5, 1.0), vec(-2))


def test_attacks_leave_their_inputs_alone() -> None:
    v, honest = vec(1, 2), [vec(1, 2), vec(3, 5)]
    for attack in (lambda: sign_flip(v), lambda: scaled(v, 2.0),
                   lambda: gaussian(v, 1.0, generator(0)), lambda: alie(honest, 1.0),
                   lambda: ipm(honest, 1.0), lambda: dissensus(v, honest, [0.3, 0.3], 0.4, 2.0)):
        attack()
    assert torch.equal(v, vec(1, 2)) and torch.equal(honest[1], vec(3, 5))


def test_label_flipping_default_and_mapped() -> None:
    labels = torch.tensor([0, 3, 9, 1])
    assert poisoning.flip_labels(labels, 10).tolist() == [9, 6, 0, 8]
    assert poisoning.flip_labels(labels, 10, {1: 7, 3: 3}).tolist() == [0, 3, 9, 7]
    assert labels.tolist() == [0, 3, 9, 1]


def test_the_trigger_is_a_bright_bottom_right_square_on_every_channel() -> None:
    images = torch.zeros(2, 3, 5, 6, dtype=torch.uint8)
    stamped = poisoning.stamp_trigger(images, size=2)
    assert bool((stamped[..., 3:, 4:] == 255).all())
    assert int(stamped.sum()) == 2 * 3 * 4 * 255
    assert int(images.sum()) == 0
    floats = poisoning.stamp_trigger(torch.zeros(1, 4, 4), size=1)  # (N, H, W), no channel
    assert float(floats[0, 3, 3]) == 1.0 and float(floats.sum()) == 1.0


def test_backdoor_poisons_the_drawn_fraction_and_is_its_generator() -> None:
    images = torch.arange(10 * 28 * 28, dtype=torch.int64).reshape(10, 1, 28, 28).to(torch.uint8)
    labels = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    poisoned, relabelled = poisoning.backdoor(images, labels, target=7, fraction=0.5,
                                    generator=generator(1))
    again = poisoning.backdoor(images, labels, target=7, fraction=0.5, generator=generator(1))
    assert torch.equal(poisoned, again[0]) and torch.equal(relabelled, again[1])
    changed = [k for k in range(10) if not torch.equal(poisoned[k], images[k])]
    chosen = sorted(torch.randperm(10, generator=generator(1))[:5].tolist())
    assert changed == chosen
    assert all(int(relabelled[k]) == 7 for k in chosen)
    assert all(int(relabelled[k]) == k for k in range(10) if k not in chosen)
    assert torch.equal(poisoned[chosen], poisoning.stamp_trigger(images[chosen]))
    untouched, same = poisoning.backdoor(images, labels, 7, 0.0, generator(1))
    assert torch.equal(untouched, images) and torch.equal(same, labels)


def test_attack_success_rate_counts_only_the_other_classes() -> None:
    labels = torch.tensor([7, 1, 2, 3])
    predictions = torch.tensor([7, 7, 0, 7])
    assert poisoning.attack_success_rate(predictions, labels, 7) == 2 / 3


BAD: list[tuple[Callable[[], object], str]] = [
    (lambda: scaled(vec(1), math.inf), "factor must be finite"),
    (lambda: gaussian(vec(1), -1.0, generator(0)), "std must be finite and >= 0"),
    (lambda: alie_z(2, 0), "which no finite z meets"),
    (lambda: alie_z(10, 6), "which no finite z meets"),
    (lambda: alie_z(10, 11), "is no population"),
    (lambda: alie([vec(1)], 1.0), "at least 2 honest vectors"),
    (lambda: ipm([vec(1)], 0.0), "epsilon must be finite and > 0"),
    (lambda: ipm([], 1.0), "at least one honest vector"),
    (lambda: dissensus(vec(0), [vec(1)], [0.5], 0.0, 1.0), "delta_i must be > 0"),
    (lambda: dissensus(vec(0), [vec(1)], [], 0.5, 1.0), "1 honest vectors but 0 weights"),
    (lambda: poisoning.flip_labels(torch.tensor([0, 10]), 10), "labels must lie in 0..9"),
    (lambda: poisoning.flip_labels(torch.tensor([0]), 10, {2: 10}), "names a class outside 0..9"),
    (lambda: poisoning.flip_labels(torch.tensor([0]), 1), "at least 2 classes"),
    (lambda: poisoning.stamp_trigger(torch.zeros(1, 4, 4), size=5), "size must be in 1..4"),
    (lambda: poisoning.stamp_trigger(torch.zeros(4, 4)), "must be (N, H, W) or (N, C, H, W)"),
    (lambda: poisoning.backdoor(torch.zeros(2, 4, 4), torch.zeros(2), 1, 1.5, generator(0)),
     "fraction must be in [0, 1]"),
    (lambda: poisoning.backdoor(torch.zeros(2, 4, 4), torch.zeros(3), 1, 0.5, generator(0)),
     "2 images but 3 labels"),
    (lambda: poisoning.attack_success_rate(torch.tensor([1]), torch.tensor([1]), 1),
     "no sample outside the target class"),
]


@pytest.mark.parametrize(("call", "says"), BAD, ids=[s for _, s in BAD])
def test_bad_parameters_raise_one_clear_line(call: Callable[[], object], says: str) -> None:
    with pytest.raises(RobustnessError) as caught:
        call()
    assert says in str(caught.value) and "\n" not in str(caught.value)
