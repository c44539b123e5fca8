"""The minimal link model: virtual time of synchronous steps.

Real sockets on one machine say nothing about a radio or a WAN, so time is simulated: each edge
has a latency and a bandwidth (from the topology, else the plan's defaults) and each node a compute
time per local step. A synchronous step lasts as long as its slowest node plus its slowest link;
every node computes the same number from the plan, so `virtual_seconds` is identical everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULTS = {"latency_ms": 1.0, "bandwidth_mbps": 100.0, "compute_ms": 10.0}


@dataclass(frozen=True)
class LinkModel:
    link_seconds: tuple[tuple[float, float], ...]  # (latency s, bits per second) per edge
    compute_seconds: tuple[float, ...]  # per node, one local step

    @classmethod
    def from_plan(cls, topology: dict[str, Any], link: dict[str, Any]) -> LinkModel:
        opts = {**DEFAULTS, **link}
        links = []
        for edge in topology["edges"]:
            attrs = edge if isinstance(edge, dict) else {}
            latency = float(attrs.get("latency_ms", opts["latency_ms"])) / 1e3
            bandwidth = float(attrs.get("bandwidth_mbps", opts["bandwidth_mbps"])) * 1e6
            links.append((latency, bandwidth))
        compute = tuple(
            float(n.get("compute_ms", opts["compute_ms"])) / 1e3 for n in topology["nodes"]
        )
        return cls(tuple(links), compute)

    def sync_step_seconds(self, message_bytes: int, compute_steps: int = 1) -> float:
        """Duration of one step in which every node computes, then every link carries a message."""
        compute = max(self.compute_seconds, default=0.0) * compute_steps
        if message_bytes <= 0 or not self.link_seconds:
            return compute
        wire = max(lat + 8.0 * message_bytes / bw for lat, bw in self.link_seconds)
        return compute + wire


class VirtualClock:
    """A node's running virtual time, advanced by the protocol's schedule."""

    def __init__(self, model: LinkModel) -> None:
        self.model = model
        self.seconds = 0.0

    def sync_step(self, message_bytes: int, compute_steps: int = 1) -> None:
        self.seconds += self.model.sync_step_seconds(message_bytes, compute_steps)
