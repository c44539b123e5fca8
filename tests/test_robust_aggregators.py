"""The robust aggregation rules (protocols/robust): each against a hand-computed neighbourhood
and against a plain numpy reference written here, their properties (plain averaging when
nothing is clipped or trimmed, bounded influence of one huge neighbour, neighbour order), and
one clear error for parameters a rule cannot honour."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

from dfl_config.errors import DflMeshError
from protocols.robust.aggregators import (
    bridge,
    coordinate_median,
    krum,
    krum_scores,
    multi_krum,
    trimmed_mean,
)
from protocols.robust.clipping import (
    adaptive_radius,
    clip,
    clipped_gossip,
    self_centred_clipping,
)
from protocols.robust.errors import RobustnessError
from protocols.robust.neighbourhood import Neighbourhood, from_row, without_non_finite
from protocols.sdk import mix


def vec(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def hood_of(own: list[float], *neighbours: list[float],
            weights: tuple[float, ...] | None = None) -> Neighbourhood:
    them = tuple(vec(*x) for x in neighbours)
    if weights is None:
        return Neighbourhood.uniform(vec(*own), them)
    return Neighbourhood(vec(*own), them, weights[1:], weights[0])


def random_hood(seed: int, neighbours: int = 6, dim: int = 7) -> Neighbourhood:
    """A neighbourhood with a random row-stochastic row (own weight first)."""
    gen = np.random.default_rng(seed)
    w = gen.random(neighbours + 1) + 0.1
    w /= w.sum()
    members = [torch.from_numpy(gen.normal(size=dim).astype(np.float32))
               for _ in range(neighbours + 1)]
    return Neighbourhood(members[0], tuple(members[1:]), tuple(map(float, w[1:])), float(w[0]))


def as_numpy(hood: Neighbourhood) -> tuple[np.ndarray, np.ndarray]:
    """The members as float64 rows (own first) and their weights (own first)."""
    rows = np.array([x.numpy() for x in hood.members], dtype=np.float64)
    return rows, np.array([hood.own_weight, *hood.weights])


# Plain references: one loop per coordinate or member, as the papers write the rules.

def ref_median(rows: np.ndarray) -> np.ndarray:
    return np.array([np.median(rows[:, j]) for j in range(rows.shape[1])])


def ref_trimmed(rows: np.ndarray, b: int) -> np.ndarray:
    n = len(rows)
    return np.array([sorted(rows[:, j])[b:n - b] for j in range(rows.shape[1])]).mean(axis=1)


def ref_bridge(rows: np.ndarray, b: int) -> np.ndarray:
    out = []
    for j in range(rows.shape[1]):
        others = sorted(rows[1:, j])
        kept = others[b:len(others) - b]
        out.append((rows[0, j] + sum(kept)) / (len(kept) + 1))
    return np.array(out)


def ref_krum_scores(rows: np.ndarray, f: int) -> list[float]:
    n = len(rows)
    scores = []
    for a in range(n):
        d = sorted(float(np.sum((rows[a] - rows[c]) ** 2)) for c in range(n) if c != a)
        scores.append(sum(d[:n - f - 2]))
    return scores


def ref_clip(z: np.ndarray, tau: float) -> np.ndarray:
    norm = float(np.sqrt(np.sum(z ** 2)))
    return z if norm <= tau else z * (tau / norm)


def ref_clipped_gossip(rows: np.ndarray, w: np.ndarray, tau: float) -> np.ndarray:
    out = rows[0].copy()
    for k in range(1, len(rows)):
        out += w[k] * ref_clip(rows[k] - rows[0], tau)
    return out


def ref_scclip(rows: np.ndarray, w: np.ndarray, tau: float, iterations: int) -> np.ndarray:
    v = rows[0].copy()
    for _ in range(iterations):
        v = v + sum(w[k] * ref_clip(rows[k] - v, tau) for k in range(len(rows)))
    return v


def close(a: torch.Tensor, b: np.ndarray) -> bool:
    return np.allclose(a.numpy(), b, rtol=1e-5, atol=1e-5)


# Hand-computed neighbourhoods.

def test_median_by_hand() -> None:
    odd = hood_of([1, 10], [2, 0], [100, 5])
    assert torch.equal(coordinate_median(odd), vec(2, 5))
    even = hood_of([1, 10], [2, 0], [100, 5], [3, 7])
    assert torch.equal(coordinate_median(even), vec(2.5, 6))


def test_trimmed_mean_by_hand() -> None:
    hood = hood_of([0, 50], [1, 1], [2, 2], [3, 3], [100, -100])
    assert torch.equal(trimmed_mean(hood, 1), vec(2, 2))
    assert torch.equal(trimmed_mean(hood, 2), vec(2, 2))


def test_krum_and_multi_krum_by_hand() -> None:
    hood = hood_of([0], [1], [2], [100], [101])
    assert krum_scores(hood, 1) == [5.0, 2.0, 5.0, 9605.0, 9802.0]
    assert torch.equal(krum(hood, 1), vec(1))
    assert torch.equal(multi_krum(hood, 1, 3), vec(1))  # (0 + 1 + 2) / 3


def test_bridge_by_hand() -> None:
    hood = hood_of([5], [1], [2], [3], [100])
    assert torch.allclose(bridge(hood, 1), vec(10 / 3))  # (5 + 2 + 3) / 3


def test_clipped_gossip_by_hand() -> None:
    hood = hood_of([0, 0], [3, 4], [0, 1], weights=(0.5, 0.25, 0.25))
    # [3, 4] is 5 away: clipped to [1.2, 1.6]; [0, 1] is within the radius.
    assert torch.allclose(clipped_gossip(hood, 2.0), vec(0.3, 0.65))


def test_adaptive_radius_by_hand() -> None:
    hood = hood_of([0], [1], [5], [3], weights=(0.25, 0.25, 0.25, 0.25))
    assert adaptive_radius(hood, 0.0) == 5.0     # nothing clipped
    assert adaptive_radius(hood, 0.25) == 3.0    # the farthest (5) clipped to the next (3)
    assert adaptive_radius(hood, 0.5) == 1.0
    assert adaptive_radius(hood, 0.75) == 0.0    # every neighbour clipped away


def test_self_centred_clipping_by_hand() -> None:
    hood = hood_of([0], [10], [1])
    assert torch.allclose(self_centred_clipping(hood, 2.0), vec(1.0))         # 2/3 + 1/3
    assert torch.allclose(self_centred_clipping(hood, 2.0, 2), vec(4 / 3))    # 1 - 1/3 + 2/3


# Against the plain references.

@pytest.mark.parametrize("seed", range(5))
def test_every_rule_matches_its_plain_reference(seed: int) -> None:
    hood = random_hood(seed)
    rows, w = as_numpy(hood)
    assert close(coordinate_median(hood), ref_median(rows))
    assert close(coordinate_median(Neighbourhood.uniform(hood.own, hood.neighbours[:5])),
                 ref_median(rows[:6]))  # an even count
    for b in range(4):
        assert close(trimmed_mean(hood, b), ref_trimmed(rows, b))
    for b in range(3):
        assert close(bridge(hood, b), ref_bridge(rows, b))
    for f in range(3):
        assert np.allclose(krum_scores(hood, f), ref_krum_scores(rows, f), rtol=1e-6)
        best = int(np.argmin(ref_krum_scores(rows, f)))
        assert close(krum(hood, f), rows[best])
        order = np.argsort(ref_krum_scores(rows, f), kind="stable")
        assert close(multi_krum(hood, f, 3), rows[order[:3]].mean(axis=0))
    for tau in (0.0, 0.5, 2.0, math.inf):
        assert close(clipped_gossip(hood, tau), ref_clipped_gossip(rows, w, tau))
        for iterations in (1, 3):
            assert close(self_centred_clipping(hood, tau, iterations),
                         ref_scclip(rows, w, tau, iterations))
    distances = [float(np.linalg.norm(rows[k] - rows[0])) for k in range(1, len(rows))]
    farthest = int(np.argmax(distances))
    remaining = sorted(d for k, d in enumerate(distances) if k != farthest)
    assert math.isclose(adaptive_radius(hood, hood.weights[farthest]), remaining[-1],
                        rel_tol=1e-6)


# Properties.

def plain_mix(hood: Neighbourhood) -> torch.Tensor:
    """gossip's sum_j W_ij x_j through the SDK's own mixing step."""
    weights = {0: hood.own_weight} | {k + 1: w for k, w in enumerate(hood.weights)}
    theirs = {k + 1: {"p": x} for k, x in enumerate(hood.neighbours)}
    return mix(weights, 0, {"p": hood.own}, theirs)["p"]


@pytest.mark.parametrize("seed", range(3))
def test_nothing_clipped_or_trimmed_is_plain_averaging(seed: int) -> None:
    weighted = random_hood(seed)
    for rule in (lambda h: clipped_gossip(h, math.inf),
                 lambda h: self_centred_clipping(h, math.inf, 3),
                 lambda h: clipped_gossip(h, adaptive_radius(h, 0.0))):
        assert torch.allclose(rule(weighted), plain_mix(weighted), atol=1e-6)
    uniform = Neighbourhood.uniform(weighted.own, weighted.neighbours)
    n = uniform.size
    for rule in (lambda h: trimmed_mean(h, 0), lambda h: bridge(h, 0),
                 lambda h: multi_krum(h, 0, n)):
        assert torch.allclose(rule(uniform), plain_mix(uniform), atol=1e-6)


def with_huge_neighbour(hood: Neighbourhood, k: int, vector: torch.Tensor) -> Neighbourhood:
    them = list(hood.neighbours)
    them[k] = vector
    return Neighbourhood(hood.own, tuple(them), hood.weights, hood.own_weight)


@pytest.mark.parametrize("seed", range(3))
def test_one_huge_neighbour_moves_a_clipping_rule_by_at_most_its_radius(seed: int) -> None:
    hood = random_hood(seed)
    tau = 0.3
    direction = torch.ones_like(hood.own)
    for k in range(len(hood.neighbours)):
        silent = with_huge_neighbour(hood, k, hood.own)  # contributes nothing
        attacked = with_huge_neighbour(hood, k, 1e6 * direction)
        for rule in (lambda h: clipped_gossip(h, tau),
                     lambda h: self_centred_clipping(h, tau)):
            moved = float(torch.linalg.vector_norm(rule(attacked) - rule(silent)))
            assert moved <= hood.weights[k] * tau * (1 + 1e-5) <= tau


@pytest.mark.parametrize("seed", range(3))
def test_one_huge_neighbour_leaves_order_statistics_among_the_honest(seed: int) -> None:
    hood = random_hood(seed)
    attacked = with_huge_neighbour(hood, 2, 1e6 * torch.ones_like(hood.own))
    honest = torch.stack([x for k, x in enumerate(hood.members) if k != 3])
    low, high = honest.min(dim=0).values, honest.max(dim=0).values
    for out in (coordinate_median(attacked), trimmed_mean(attacked, 1), bridge(attacked, 1)):
        assert bool(((out >= low) & (out <= high)).all())
    assert not torch.equal(krum(attacked, 1), attacked.neighbours[2])
    assert float(multi_krum(attacked, 1, 4).abs().max()) < 10


ORDER_FREE: dict[str, Callable[[Neighbourhood], torch.Tensor]] = {
    "median": coordinate_median,
    "trimmed mean": lambda h: trimmed_mean(h, 2),
    "bridge": lambda h: bridge(h, 1),
    "krum": lambda h: krum(h, 1),
}


@pytest.mark.parametrize("name", ORDER_FREE)
def test_order_free_rules_ignore_the_neighbours_order_bit_for_bit(name: str) -> None:
    hood = random_hood(7)
    order = [4, 0, 5, 2, 1, 3]
    permuted = Neighbourhood(hood.own, tuple(hood.neighbours[k] for k in order),
                             tuple(hood.weights[k] for k in order), hood.own_weight)
    assert torch.equal(ORDER_FREE[name](permuted), ORDER_FREE[name](hood))


def test_weighted_rules_follow_their_neighbours_when_reordered() -> None:
    hood = random_hood(8)
    order = [5, 3, 1, 0, 2, 4]
    permuted = Neighbourhood(hood.own, tuple(hood.neighbours[k] for k in order),
                             tuple(hood.weights[k] for k in order), hood.own_weight)
    assert torch.allclose(multi_krum(permuted, 1, 3), multi_krum(hood, 1, 3), atol=1e-6)
    assert torch.allclose(clipped_gossip(permuted, 0.5), clipped_gossip(hood, 0.5), atol=1e-6)
    assert adaptive_radius(permuted, 0.3) == adaptive_radius(hood, 0.3)


def test_a_row_gives_the_same_bits_whatever_order_messages_arrived_in() -> None:
    """`from_row` orders by neighbour id, as `mix` does: a zmq run's arrival order is not
    an inproc run's, and the result must not see it."""
    hood = random_hood(9, neighbours=4)
    row = {3: 0.2, 1: 0.2, 7: 0.2, 5: 0.2, 9: 0.2}
    vectors = dict(zip((1, 5, 7, 9), hood.neighbours, strict=True))
    early = from_row(row, 3, hood.own, vectors)
    late = from_row(row, 3, hood.own, dict(reversed(vectors.items())))
    assert torch.equal(clipped_gossip(early, 0.4), clipped_gossip(late, 0.4))
    assert torch.equal(trimmed_mean(early, 1), trimmed_mean(late, 1))


def test_a_missing_neighbour_leaves_its_weight_on_the_node_as_mix_does() -> None:
    own, other = vec(1, 1), vec(3, 5)
    hood = from_row({0: 0.5, 1: 0.25, 2: 0.25}, 0, own, {1: other})
    assert hood.neighbours == (other,) and hood.weights == (0.25,) and hood.own_weight == 0.75
    expected = mix({0: 0.5, 1: 0.25, 2: 0.25}, 0, {"p": own}, {1: {"p": other}})["p"]
    assert torch.allclose(clipped_gossip(hood, math.inf), expected)


def test_a_neighbour_sending_nan_or_inf_is_dropped_with_its_weight_moved_home() -> None:
    hood = hood_of([0, 0], [1, float("nan")], [2, 2], [float("inf"), 0],
                   weights=(0.4, 0.2, 0.2, 0.2))
    clean, dropped = without_non_finite(hood)
    assert dropped == (0, 2)
    assert clean.neighbours[0].tolist() == [2, 2] and clean.weights == (0.2,)
    assert math.isclose(clean.own_weight, 0.8)
    assert bool(clipped_gossip(clean, 1.0).isfinite().all())
    assert without_non_finite(clean) == (clean, ())


def test_clip_keeps_short_vectors_and_shortens_long_ones() -> None:
    assert torch.equal(clip(vec(3, 4), 5.0), vec(3, 4))
    assert torch.allclose(clip(vec(3, 4), 1.0), vec(0.6, 0.8))
    assert torch.equal(clip(vec(3, 4), 0.0), vec(0, 0))
    z = vec(3, 4)
    clip(z, 1.0).add_(1)
    clip(z, 9.0).add_(1)
    assert torch.equal(z, vec(3, 4))


def test_no_rule_writes_into_the_vectors_it_was_given() -> None:
    hood = random_hood(11)
    before = [x.clone() for x in hood.members]
    outputs = [coordinate_median(hood), trimmed_mean(hood, 1), bridge(hood, 1), krum(hood, 1),
               multi_krum(hood, 1, 3), clipped_gossip(hood, 0.5), clipped_gossip(hood, math.inf),
               self_centred_clipping(hood, 0.5, 2)]
    for out in outputs:
        out.add_(1.0)  # a caller may update the result in place
    assert all(torch.equal(x, y) for x, y in zip(hood.members, before, strict=True))


# Bad parameters: one clear error each.

BAD: list[tuple[Callable[[], object], str]] = [
    (lambda: trimmed_mean(hood_of([0], [1], [2]), 2), "b must be in 0..1"),
    (lambda: trimmed_mean(hood_of([0], [1], [2]), -1), "b must be in 0..1"),
    (lambda: bridge(hood_of([0], [1], [2]), 1), "at least 2b + 1 neighbours"),
    (lambda: krum(hood_of([0], [1], [2], [3]), 1), "n > 2f + 2, so f in 0..0"),
    (lambda: krum(hood_of([0], [1]), 0), "at least 3 vectors"),
    (lambda: multi_krum(hood_of([0], [1], [2], [3], [4]), 1, 6), "m must be in 1..5"),
    (lambda: clipped_gossip(hood_of([0], [1]), -1.0), "radius must be >= 0"),
    (lambda: clip(vec(1), float("nan")), "radius must be >= 0"),
    (lambda: adaptive_radius(hood_of([0], [1]), 1.5), "must be in [0, 1]"),
    (lambda: self_centred_clipping(hood_of([0], [1]), 1.0, 0), "iterations must be >= 1"),
    (lambda: Neighbourhood(vec(0, 0), (vec(1),), (0.5,), 0.5), "unlike the own vector's"),
    (lambda: Neighbourhood(vec(0), (vec(1),), (), 0.5), "1 neighbours but 0 weights"),
    (lambda: Neighbourhood(vec(0), (vec(1),), (-0.5,), 0.5), "finite and >= 0"),
    (lambda: Neighbourhood(torch.zeros(2, 2), (), (), 1.0), "flat float tensor"),
]


@pytest.mark.parametrize(("call", "says"), BAD, ids=[s for _, s in BAD])
def test_bad_parameters_raise_one_clear_line(call: Callable[[], object], says: str) -> None:
    with pytest.raises(RobustnessError) as caught:
        call()
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, DflMeshError)
