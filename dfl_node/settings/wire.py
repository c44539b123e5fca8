"""The `wire:` section: the caps and timeouts every node enforces on its sockets, and what the
run does when a node dies.

A cap of 0 would refuse every message and a timeout of 0 fail every receive, hence the
positive types.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import ValidationError

from dfl_config.problems import one_line
from dfl_config.section import Count, Positive, Section

OnFailure = Literal["stop", "continue"]
ON_FAILURE: tuple[str, ...] = get_args(OnFailure)


class WireSettings(Section):
    hwm: Count = 1000
    """ZeroMQ high-water mark: messages queued per socket before sends block."""
    recv_timeout_s: Positive = 300.0
    """How long a node waits for a neighbour's message."""
    max_tensors: Count = 4096
    """Most tensors one message may carry (dfl_node/wire/codec.py)."""
    max_message_bytes: Count | None = None
    """Largest message a node accepts (its tensors' bytes); None: 4 times the model's bytes,
    at least 1 MiB (dfl_node/runner/receive_caps.py)."""
    rendezvous_s: Positive | None = None
    """How long a node waits for the rest of the mesh to start; None: recv_timeout_s
    (dfl_node/comm/rendezvous.py)."""
    deadline_s: Positive = 10.0
    """A neighbour silent this long is dead; stretched on a host crowded with node processes
    (dfl_node/transports/liveness.py, CROWD_FREE)."""
    on_failure: OnFailure = "stop"
    """After a death: stop the run, or (continue) the survivors go on without the dead
    (dfl_node/runner/membership.py; only for protocols that survive failures)."""

    @property
    def rendezvous_seconds(self) -> float:
        """The start-up patience: `rendezvous_s`, or `recv_timeout_s` when unset."""
        return self.recv_timeout_s if self.rendezvous_s is None else self.rendezvous_s


def rendezvous_seconds(wire: Mapping[str, Any] | WireSettings) -> float:
    """The plan's start-up patience: `rendezvous_s`, or `recv_timeout_s` when unset (keys the
    dict lacks have WireSettings's defaults)."""
    try:
        return WireSettings.model_validate(wire).rendezvous_seconds
    except ValidationError as exc:
        raise ValueError(one_line(exc, WireSettings, ("wire",))) from None
