"""The protocol interface: one object per node, driven round by round by the runtime.

A protocol speaks only through `ctx.comm` and advances `ctx.clock` by its schedule; it never
touches a socket, a file or the collector.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from dfl_node.context import NodeContext
from dfl_node.plan import RunPlan
from dfl_node.prephase import Coordination


class Protocol(ABC):
    # Server-based protocols (q-FFL) get an aggregator node in the plan beside the clients.
    server_based: ClassVar[bool] = False

    # True: the runtime runs a one-time pre-phase before round 0 (report -> coordinator ->
    # answer; dfl_node/prephase.py), with the three methods below.
    needs_prephase: ClassVar[bool] = False

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx

    def prephase_report(self) -> dict[str, np.ndarray]:
        """What this node tells the coordinator (named arrays)."""
        raise NotImplementedError(f"{type(self).__name__} has no pre-phase")

    def prephase_answer(self, answer: Mapping[str, np.ndarray]) -> None:
        """Take the coordinator's answer; raise ValueError if it is malformed."""
        raise NotImplementedError(f"{type(self).__name__} has no pre-phase")

    @staticmethod
    def coordinate(plan: RunPlan, reports: Mapping[int, Mapping[str, np.ndarray]]) -> Coordination:
        """The coordinator's side: every node's report in, an answer per node out (runs once,
        in the coordinator process). Raise ValueError (one line) on reports it cannot use."""
        raise NotImplementedError("this protocol has no pre-phase")

    @staticmethod
    def check_hyper(hyper: Mapping[str, Any]) -> None:
        """Raise ValueError (one line) on a bad `hyper` setting; the launcher calls it so that a
        bad setting is exit 2 before any node starts."""
        require_int(hyper, "torch_threads", 1)


    @abstractmethod
    def run_round(self, r: int) -> dict[str, float]:
        """Run round `r`; return protocol metrics for this round (e.g. `train_loss`)."""

    def eval_model(self) -> nn.Module:
        """The model that evaluation and `final/` report (personalised protocols may differ)."""
        return self.ctx.model

    def summary(self) -> dict[str, float | dict[str, float]]:
        """Protocol keys for summary.json; the launcher averages them over nodes."""
        return {}

    def extra_state(self) -> dict[str, torch.Tensor]:
        """Tensors beside the model worth keeping (e.g. neighbour copies), saved in final/."""
        return {}


def require_int(hyper: Mapping[str, Any], key: str, default: int, minimum: int = 1) -> None:
    value = hyper.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{key} must be an integer >= {minimum}, got {value!r}")


def require_positive(hyper: Mapping[str, Any], key: str) -> None:
    value = hyper.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{key} must be a number > 0, got {value!r}")
