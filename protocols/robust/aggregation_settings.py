"""The `aggregation:` setting of a protocol that declares robust aggregation
(protocols/capabilities.py's `RobustAggregation`): which rule a node mixes its neighbourhood
with, and the rule's parameters, as typed models the launcher reads without torch.

    hyper:
      aggregation: {rule: clipped-gossip, delta: 0.34}      # the adaptive radius

One model per rule, chosen by `rule`; a mapping without `rule` is the default rule, `mean`
(gossip's sum_j W_ij x_j, what every run computed before robust rules existed), so that
`--set hyper.aggregation.tau=0.5` after a rule was chosen needs no `rule` again. Each rule
says what it needs of a node's in-degree (`check_in_degree`, the same check the pure rules
make on their vectors, protocols/robust/requirements.py), which the launcher applies to the
smallest in-degree of the plan's graph before any node starts; and how it aggregates a
`Neighbourhood` (`aggregate`, which imports torch when a node first calls it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import model_validator

from dfl_config.section import (
    Count,
    NonNegative,
    NonNegativeInt,
    Section,
    UnitInterval,
    tagged_union,
)
from protocols.robust.requirements import (
    check_bridge,
    check_krum,
    check_multi_krum,
    check_trimmed_mean,
)

if TYPE_CHECKING:
    import torch

    from protocols.robust.neighbourhood import Neighbourhood


@dataclass(frozen=True)
class Aggregated:
    """A rule's result and what it did, as protocol metrics (`clipped_neighbours`, `radius`),
    so that a run shows where a defence acted."""

    vector: torch.Tensor
    report: dict[str, float] = field(default_factory=dict)


class AggregationRule(Section):
    """What every rule model has: its `rule` tag, its in-degree needs and its aggregation."""

    rule: str

    def check_in_degree(self, neighbours: int) -> None:
        """Raise RobustnessError (one line) if a node with `neighbours` in-neighbours cannot
        run this rule. Most rules run on any neighbourhood."""

    def aggregate(self, hood: Neighbourhood) -> Aggregated:
        raise NotImplementedError


class MeanRule(AggregationRule):
    """Gossip's mean, sum_j W_ij x_j over the node's row: no defence."""

    rule: Literal["mean"] = "mean"

    def aggregate(self, hood: Neighbourhood) -> Aggregated:
        """The W-weighted sum in member order. `robust_mix` does not come here: for this rule
        it returns `mix` itself, whose per-tensor sums every run without a robust rule has."""
        from protocols.robust.neighbourhood import ordered_sum

        weights = (hood.own_weight, *hood.weights)
        return Aggregated(ordered_sum(zip(weights, hood.members, strict=True), hood.own))


class MedianRule(AggregationRule):
    """The coordinate-wise median of the node and its neighbours (Yin et al. 2018)."""

    rule: Literal["median"] = "median"

    def aggregate(self, hood: Neighbourhood) -> Aggregated:
        from protocols.robust.aggregators import coordinate_median

        return Aggregated(coordinate_median(hood))


class TrimmedMeanRule(AggregationRule):
    """The coordinate-wise trimmed mean (Yin et al. 2018)."""

    rule: Literal["trimmed-mean"] = "trimmed-mean"
    b: NonNegativeInt
    """Values trimmed per side of each coordinate; 2b < 1 + in-degree."""

    def check_in_degree(self, neighbours: int) -> None:
        check_trimmed_mean(self.b, 1 + neighbours)

    def aggregate(self, hood: Neighbourhood) -> Aggregated:
        from protocols.robust.aggregators import trimmed_mean

        return Aggregated(trimmed_mean(hood, self.b))


class KrumRule(AggregationRule):
    """The member with the lowest Krum score (Blanchard et al. 2017)."""

    rule: Literal["krum"] = "krum"
    f: NonNegativeInt
    """Byzantine neighbours assumed; n = 1 + in-degree must exceed 2f + 2."""

    def check_in_degree(self, neighbours: int) -> None:
        check_krum(self.f, 1 + neighbours)

    def aggregate(self, hood: Neighbourhood) -> Aggregated:
        from protocols.robust.aggregators import krum

        return Aggregated(krum(hood, self.f))


class MultiKrumRule(AggregationRule):
    """The mean of the m members with the lowest Krum scores (Blanchard et al. 2017)."""

    rule: Literal["multi-krum"] = "multi-krum"
    f: NonNegativeInt
    """Byzantine neighbours assumed; n = 1 + in-degree must exceed 2f + 2."""
    m: Count
    """Members averaged; at most 1 + in-degree."""

    def check_in_degree(self, neighbours: int) -> None:
        check_multi_krum(self.f, self.m, 1 + neighbours)

    def aggregate(self, hood: Neighbourhood) -> Aggregated:
        from protocols.robust.aggregators import multi_krum

        return Aggregated(multi_krum(hood, self.f, self.m))


class BridgeRule(AggregationRule):
    """BRIDGE-T's screening of the neighbours around the node's own value (Fang, Yang, Bajwa
    2022)."""

    rule: Literal["bridge"] = "bridge"
    b: NonNegativeInt
    """Neighbour values screened per side of each coordinate; 2b + 1 <= in-degree if b > 0."""

    def check_in_degree(self, neighbours: int) -> None:
        check_bridge(self.b, neighbours)

    def aggregate(self, hood: Neighbourhood) -> Aggregated:
        from protocols.robust.aggregators import bridge

        return Aggregated(bridge(hood, self.b))


class ClippedGossipRule(AggregationRule):
    """x_i + sum_j W_ij CLIP(x_j - x_i, tau) (He, Karimireddy, Jaggi 2022), with a fixed
    radius `tau` or the adaptive radius of Byzantine weight `delta`."""

    rule: Literal["clipped-gossip"] = "clipped-gossip"
    tau: NonNegative | None = None
    """A fixed clipping radius (give tau or delta)."""
    delta: UnitInterval | None = None
    """The Byzantine weight assumed: each round's radius clips the farthest neighbours of this
    total weight (give tau or delta)."""

    @model_validator(mode="after")
    def _one_radius(self) -> ClippedGossipRule:
        if (self.tau is None) == (self.delta is None):
            raise ValueError("clipped-gossip takes tau (a fixed radius) or delta (the adaptive "
                             "radius's Byzantine weight), exactly one of them")
        return self

    def aggregate(self, hood: Neighbourhood) -> Aggregated:
        from protocols.robust.clipping import adaptive_radius, clipped_gossip_reported

        tau = self.tau if self.tau is not None else adaptive_radius(hood, self.delta or 0.0)
        done = clipped_gossip_reported(hood, tau)
        return Aggregated(done.vector, {"clipped_neighbours": done.clipped,
                                        "radius": done.radius})


class SelfCentredClippingRule(AggregationRule):
    """v_{l+1} = v_l + sum_m W_im CLIP(x_m - v_l, tau) from v_0 = x_i, `iterations` times
    (SCClip; Karimireddy, He, Jaggi 2021's centred clipping)."""

    rule: Literal["self-centred-clipping"] = "self-centred-clipping"
    tau: NonNegative
    """The clipping radius."""
    iterations: Count = 1
    """L; with 1, ClippedGossip at a fixed radius."""

    def aggregate(self, hood: Neighbourhood) -> Aggregated:
        from protocols.robust.clipping import self_centred_clipping_reported

        done = self_centred_clipping_reported(hood, self.tau, self.iterations)
        return Aggregated(done.vector, {"clipped_neighbours": done.clipped,
                                        "radius": done.radius})


RULES: tuple[type[AggregationRule], ...] = (
    MeanRule, MedianRule, TrimmedMeanRule, KrumRule, MultiKrumRule, BridgeRule,
    ClippedGossipRule, SelfCentredClippingRule)

DEFAULT_AGGREGATION = MeanRule()
"""The rule of a protocol's `aggregation` field when a run names none, and of a mapping
without `rule`."""

if TYPE_CHECKING:
    Aggregation = (MeanRule | MedianRule | TrimmedMeanRule | KrumRule | MultiKrumRule
                   | BridgeRule | ClippedGossipRule | SelfCentredClippingRule)
else:
    Aggregation: Any = tagged_union(RULES, "rule", DEFAULT_AGGREGATION.rule)
