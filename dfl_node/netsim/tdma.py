"""The TDMA link schedule: directed links, their conflict graph, a DSatur colouring, slots.

Why a colouring: on a shared radio channel two transmissions collide when they share a
transmitter or a receiver, when one node would have to send and receive at once (half-duplex),
or when a transmitter is within the interference range R_I of the other link's receiver. Links
that conflict get different colours; colour c is slot c of a frame of C slots, and one exchange
step is one frame (DSC paper Sec. II; docs/protocols/dsc.md#tdma; slots are numbered from 0).

Every process computes the same schedule from the plan with no randomness: DSatur picks the
uncoloured link of highest saturation, then of highest conflict degree, then the
lexicographically smallest (a, b), and gives it the smallest colour none of its neighbours has.
Without node positions the interference rule is skipped (the shared-node rules still hold).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import ValidationError

from dfl_config.problems import one_line
from dfl_node.settings.schedule import ScheduleSection
from dfl_node.settings.tdma import TdmaSettings

Link = tuple[int, int]  # (transmitter, receiver)
Positions = Mapping[int, Sequence[float]]


@dataclass(frozen=True)
class TdmaSchedule:
    """Slot c holds the links of colour c, each slot sorted; C = len(slots)."""

    slots: tuple[tuple[Link, ...], ...]

    @property
    def frame_length(self) -> int:
        return len(self.slots)

    def colour(self, link: Link) -> int:
        return self._colours[link]

    @cached_property
    def _colours(self) -> dict[Link, int]:
        return {link: c for c, slot in enumerate(self.slots) for link in slot}

    def send_order(self, node: int) -> list[tuple[int, int]]:
        """(slot, receiver) of the node's outgoing links, in slot order: its sending sequence."""
        return sorted((c, b) for c, slot in enumerate(self.slots) for a, b in slot if a == node)

    def receive_slots(self, node: int) -> dict[int, int]:
        """transmitter -> slot of each link into `node`: what a receiver checks messages against."""
        return {a: c for c, slot in enumerate(self.slots) for a, b in slot if b == node}

    def to_json(self) -> list[list[list[int]]]:
        return [[list(link) for link in slot] for slot in self.slots]

    @classmethod
    def from_json(cls, slots: Iterable[Iterable[Sequence[int]]]) -> TdmaSchedule:
        return cls(tuple(tuple((int(a), int(b)) for a, b in slot) for slot in slots))


def directed_links(edges: Iterable[tuple[int, int]]) -> list[Link]:
    """Both directions of every undirected edge, sorted: the 2|E| feasible one-hop links."""
    return sorted({(u, v) for u, v in edges} | {(v, u) for u, v in edges})


def conflicts(l1: Link, l2: Link, positions: Positions | None, r_i: float) -> bool:
    """The conflict rules of docs/protocols/dsc.md#tdma; the interference rule only with
    positions."""
    (a, b), (c, d) = l1, l2
    if {a, b} & {c, d}:  # shared tx, shared rx, or one node both sending and receiving
        return True
    if positions is None:
        return False
    return distance(positions, a, d) <= r_i or distance(positions, c, b) <= r_i


def conflict_graph(links: Sequence[Link], positions: Positions | None,
                   r_i: float) -> dict[Link, set[Link]]:
    graph: dict[Link, set[Link]] = {link: set() for link in links}
    for i, l1 in enumerate(links):
        for l2 in links[i + 1:]:
            if conflicts(l1, l2, positions, r_i):
                graph[l1].add(l2)
                graph[l2].add(l1)
    return graph


def dsatur(graph: Mapping[Link, set[Link]]) -> dict[Link, int]:
    """Deterministic DSatur: saturation, then degree, then the smallest (a, b) first."""
    colour: dict[Link, int] = {}
    seen: dict[Link, set[int]] = {link: set() for link in graph}
    while len(colour) < len(graph):
        pick = min((link for link in graph if link not in colour),
                   key=lambda link: (-len(seen[link]), -len(graph[link]), link))
        c = next(k for k in range(len(graph) + 1) if k not in seen[pick])
        colour[pick] = c
        for other in graph[pick]:
            seen[other].add(c)
    return colour


def build_schedule(edges: Iterable[tuple[int, int]], positions: Positions | None,
                   r_i: float) -> TdmaSchedule:
    links = directed_links(edges)
    colour = dsatur(conflict_graph(links, positions, r_i))
    frame = max(colour.values(), default=-1) + 1
    return TdmaSchedule(tuple(tuple(sorted(link for link in links if colour[link] == c))
                              for c in range(frame)))


def frame_seconds(schedule: TdmaSchedule, link_seconds: Mapping[Link, float]) -> float:
    """A slot lasts as long as its slowest link; a frame is the sum of its slots."""
    return sum(max((link_seconds.get(link, 0.0) for link in slot), default=0.0)
               for slot in schedule.slots)


def node_positions(topology: Mapping[str, Any]) -> dict[int, tuple[float, ...]] | None:
    """Positions of every node of a plan's topology, or None unless every node has one."""
    out = {int(n["id"]): tuple(map(float, n["position"]))
           for n in topology["nodes"] if n.get("position") is not None}
    return out if len(out) == len(topology["nodes"]) else None


def communication_range(topology: Mapping[str, Any], positions: Positions) -> float:
    """r_c: the generator's (grown) radius, else the longest edge of the topology."""
    generator = topology.get("generator") or {}
    radius = generator.get("grown_radius", (generator.get("params") or {}).get("radius"))
    if radius is not None:
        return float(radius)
    return max((distance(positions, *edge_pair(e)) for e in topology["edges"]), default=0.0)


def deployment_side(topology: Mapping[str, Any]) -> float:
    """The side of the square the generator drew positions in (1 when not recorded)."""
    generator = topology.get("generator") or {}
    return float((generator.get("params") or {}).get("side", 1.0))


def edge_pair(edge: Any) -> tuple[int, int]:
    if isinstance(edge, dict):
        return int(edge["u"]), int(edge["v"])
    return int(edge[0]), int(edge[1])


def distance(positions: Positions, a: int, b: int) -> float:
    return math.dist(positions[a], positions[b])


MODES = ("sync", "tdma")


def plan_section(topology: Mapping[str, Any], mode: str,
                 options: Mapping[str, Any] | TdmaSettings) -> ScheduleSection:
    """The plan's `schedule` section: the mode and, for TDMA, R_I and the slot lists.

    `options` is the user's `tdma` section (TdmaSettings, or its dict). R_I defaults to
    interference_factor x r_c (docs/protocols/dsc.md#a11); it is None, and the interference
    rule skipped, when the topology has no positions. ValueError (one line) on bad input.
    """
    if mode not in MODES:
        raise ValueError(f"schedule must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "sync":
        return ScheduleSection(mode="sync")
    try:
        settings = TdmaSettings.model_validate(options)
    except ValidationError as exc:
        raise ValueError(one_line(exc, TdmaSettings, ("tdma",))) from None
    r_i = settings.interference_range
    positions = node_positions(topology)
    if positions is None:
        r_i = None
    elif r_i is None:
        r_i = settings.interference_factor * communication_range(topology, positions)
    edges = [edge_pair(e) for e in topology["edges"]]
    schedule = build_schedule(edges, positions, r_i or 0.0)
    return ScheduleSection(mode="tdma", interference_range=r_i,
                           frame_length=schedule.frame_length, slots=schedule.slots)


def schedule_from_plan(topology: Mapping[str, Any],
                       section: ScheduleSection) -> TdmaSchedule | None:
    """This process's own schedule (None for sync); ValueError if it is not the plan's."""
    if section.mode == "sync":
        return None
    positions = node_positions(topology)
    r_i = section.interference_range or 0.0
    mine = build_schedule([edge_pair(e) for e in topology["edges"]], positions, r_i)
    if mine != TdmaSchedule(section.slots):
        raise ValueError("the plan's TDMA slots differ from the ones this node computes")
    return mine

