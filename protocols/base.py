"""The protocol interface: one object per node, driven round by round by the runtime.

A protocol speaks only through `ctx.comm` and advances `ctx.clock` by its schedule; it never
touches a socket, a file or the collector.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from dfl_node.context import NodeContext


class Protocol(ABC):
    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx

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
