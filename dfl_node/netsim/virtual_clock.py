"""The link model: virtual time of synchronous steps and TDMA frames, and retransmissions.

Real sockets on one machine say nothing about a radio or a WAN, so time is simulated. Each
directed link has a propagation latency, a bandwidth and a packet-loss probability (from the
topology's edge attributes, else the plan's `link` defaults, or from distance and SNR: see
`radio`), and each node a compute time per local step. A message costs the link its latency plus
the airtime of its packets' transmissions (retransmitted until delivered). A synchronous step
lasts as long as its slowest node plus its slowest link; a TDMA frame lasts the sum of its slots,
each as long as its slowest link. Every node computes the same numbers from the plan, and draws
of the `sampled` mode come from a stream fixed by (seed, frame, link), so `virtual_seconds` is
the same everywhere.

Under TDMA the communication time comes from `Comm`'s frames and the payload sizes that really
crossed the sockets; `sync_step` then adds only the protocol's compute time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import ValidationError

from dfl_config.problems import one_line
from dfl_node.netsim import radio, tdma
from dfl_node.netsim.tdma import Link, TdmaSchedule
from dfl_node.settings.link import LinkSettings


@dataclass(frozen=True)
class LinkParams:
    latency_s: float
    packet_s: float  # airtime of one packet transmission
    loss: float  # per-packet loss probability


@dataclass
class LinkStats:
    """What one directed link carried over a run, and what it cost."""

    messages: int = 0
    payload_bytes: int = 0
    packets: int = 0
    transmissions: float = 0.0
    seconds: float = 0.0

    def add(self, other: LinkStats) -> None:
        self.messages += other.messages
        self.payload_bytes += other.payload_bytes
        self.packets += other.packets
        self.transmissions += other.transmissions
        self.seconds += other.seconds

    def as_dict(self) -> dict[str, float]:
        return {"messages": self.messages, "payload_bytes": self.payload_bytes,
                "packets": self.packets, "transmissions": self.transmissions,
                "retransmissions": self.transmissions - self.packets, "seconds": self.seconds}


@dataclass(frozen=True)
class LinkModel:
    cfg: LinkSettings
    links: dict[Link, LinkParams]  # both directions of every edge
    compute_seconds: tuple[float, ...]  # per node, one local step
    seed: int = 0
    # slowest link's seconds per message size, for `expected` retransmissions (which do not
    # depend on the frame): every node asks for the same size every step, and the maximum
    # over all links of the mesh is O(links) (1,000 on a ring of 500) each time otherwise
    _slowest: dict[int, float] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_plan(cls, topology: dict[str, Any], link: Mapping[str, Any] | LinkSettings,
                  seed: int = 0) -> LinkModel:
        """ValueError (one line) on bad link options or a distance model without positions.

        `link` is the plan's `link` section (a dict: validating it again costs nothing and
        gives a hand-made plan the model's defaults) or the launcher's model of it."""
        try:
            cfg = LinkSettings.model_validate(link)
        except ValidationError as exc:
            raise ValueError(one_line(exc, LinkSettings)) from None
        positions = tdma.node_positions(topology)
        if cfg.needs_positions and positions is None:
            raise ValueError(f"loss_model {cfg.loss_model} needs node positions; "
                             "the topology has none")
        d0 = cfg.d0 if cfg.d0 is not None else 0.1 * tdma.deployment_side(topology)
        links = {}
        for edge in topology["edges"]:
            attrs = edge if isinstance(edge, dict) else {}
            u, v = tdma.edge_pair(edge)
            if positions is not None and cfg.needs_positions:
                loss = radio.loss_probability(tdma.distance(positions, u, v), cfg, d0)
            else:
                loss = float(attrs.get("loss", cfg.loss))
                if not 0 <= loss < 1:
                    raise ValueError(f"edge {u}-{v}: loss must be in [0, 1), got {loss}")
            bandwidth = float(attrs.get("bandwidth_mbps", cfg.bandwidth_mbps)) * 1e6
            params = LinkParams(float(attrs.get("latency_ms", cfg.latency_ms)) / 1e3,
                                8.0 * cfg.packet_bytes / bandwidth, loss)
            links[(u, v)] = links[(v, u)] = params
        compute = tuple(float(n.get("compute_ms", cfg.compute_ms)) / 1e3
                        for n in topology["nodes"])
        return cls(cfg, links, compute, seed)

    def transmissions(self, link: Link, n_packets: int, frame: int) -> float:
        loss = self.links[link].loss
        if self.cfg.retransmissions == "expected":
            return radio.expected_transmissions(n_packets, loss)
        import numpy as np  # here: a declaration names the link model, and reading one needs none

        rng = np.random.default_rng((self.seed, frame, *link))
        return float(radio.sampled_transmissions(n_packets, loss, rng))

    def carry(self, link: Link, message_bytes: int, frame: int) -> LinkStats:
        """One message on one link in one frame (or step): its packets, transmissions, time."""
        if message_bytes <= 0:
            return LinkStats()
        params = self.links[link]
        n_packets = radio.packets(message_bytes, self.cfg.packet_bytes)
        sent = self.transmissions(link, n_packets, frame)
        return LinkStats(1, message_bytes, n_packets, sent,
                         params.latency_s + sent * params.packet_s)

    def sync_step_seconds(self, message_bytes: int, compute_steps: int = 1,
                          frame: int = 0) -> float:
        """One step in which every node computes, then every link carries a message."""
        return self.slowest_compute * compute_steps + self.slowest_link(message_bytes, frame)

    @cached_property
    def slowest_compute(self) -> float:
        return max(self.compute_seconds, default=0.0)

    def slowest_link(self, message_bytes: int, frame: int) -> float:
        """The slowest link's seconds for one message of `message_bytes` in `frame`."""
        cacheable = self.cfg.retransmissions == "expected"
        if cacheable and message_bytes in self._slowest:
            return self._slowest[message_bytes]
        wire = max((self.carry(link, message_bytes, frame).seconds for link in self.links),
                   default=0.0)
        if cacheable:
            self._slowest[message_bytes] = wire
        return wire


class VirtualClock:
    """A node's running virtual time, advanced by the protocol's compute and by the schedule.

    Under TDMA, `Comm` reports each frame's payload sizes on this node's links; a link the node
    does not touch is taken to carry as much as the largest message this node sent in the frame
    (exact for every exchange in which all messages of a step have one size). Stats are kept for
    this node's outgoing links, whose sizes are always known.
    """

    def __init__(self, model: LinkModel, schedule: TdmaSchedule | None = None,
                 node_id: int = -1) -> None:
        self.model = model
        self.schedule = schedule
        self.node_id = node_id
        self.seconds = 0.0
        self.frames = 0
        self.link_stats: dict[Link, LinkStats] = {}
        self._expected: dict[int, int] = {}

    def sync_step(self, message_bytes: int, compute_steps: int = 1) -> None:
        if self.schedule is not None:
            self.seconds += self.model.slowest_compute * compute_steps
            return
        self.seconds += self.model.sync_step_seconds(message_bytes, compute_steps, self.frames)
        self.frames += 1

    def expect(self, sender_bytes: Mapping[int, int]) -> None:
        """Payload bytes each sender puts on its links in the next frame, for frames whose
        messages differ in size by sender (DSC's policy vectors, K floats per task): the links
        this node does not touch are then charged what their sender really sends."""
        self._expected = dict(sender_bytes)

    def tdma_frame(self, sizes: Mapping[Link, int]) -> None:
        """One TDMA frame that carried `sizes` (payload bytes) on this node's links."""
        assert self.schedule is not None, "tdma_frame needs a TDMA schedule"
        mine = [size for (a, _), size in sizes.items() if a == self.node_id]
        assumed = max(mine, default=0)
        expected, self._expected = self._expected, {}
        carried = {link: self.model.carry(link, sizes.get(link, expected.get(link[0], assumed)),
                                          self.frames)
                   for slot in self.schedule.slots for link in slot}
        self.seconds += tdma.frame_seconds(self.schedule,
                                           {link: s.seconds for link, s in carried.items()})
        for link in sizes:
            if link[0] == self.node_id:
                self.link_stats.setdefault(link, LinkStats()).add(carried[link])
        self.frames += 1

    def retransmissions(self) -> float:
        return sum(s.transmissions - s.packets for s in self.link_stats.values())

    def link_report(self) -> dict[str, dict[str, float]]:
        return {f"{a}->{b}": s.as_dict() for (a, b), s in sorted(self.link_stats.items())}
