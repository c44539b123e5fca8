"""Local learning steps shared by all protocols: mini-batches, gradients, evaluation.

Batches come from the node's own `batches` stream, so the sequence of samples a node sees is
fixed by the plan, not by timing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from dfl_node.learning.arrays import Samples


class BatchSampler:
    """Draws mini-batches by sampling a fresh permutation per epoch."""

    # what a checkpoint keeps (dfl_node/state/checkpoint_codec.py): the stream and the epoch's rest
    checkpoint_fields: ClassVar[tuple[str, ...]] = ("rng", "_order")

    def __init__(self, x: Samples, y: np.ndarray, batch_size: int, rng: np.random.Generator,
                 device: torch.device) -> None:
        self.x, self.y = x, y
        self.batch_size = min(batch_size, len(y))
        self.rng = rng
        self.device = device
        self._order = np.empty(0, dtype=np.int64)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        if len(self._order) < self.batch_size:
            self._order = self.rng.permutation(len(self.y))
        idx, self._order = self._order[: self.batch_size], self._order[self.batch_size :]
        idx = np.sort(idx)
        x = torch.from_numpy(np.ascontiguousarray(self.x[idx])).to(self.device)
        y = torch.from_numpy(np.ascontiguousarray(self.y[idx])).to(self.device)
        return x, y


def compute_gradients(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                      parameters: Iterable[torch.Tensor] | None = None) -> float:
    """Fill `.grad` of every parameter with the mini-batch cross-entropy gradient.
    `parameters`: the model's, when the caller holds them (walking the module tree for them
    costs more than a small model's step)."""
    if parameters is None:
        model.zero_grad(set_to_none=False)
    else:
        for p in parameters:
            if p.grad is not None:
                p.grad.zero_()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return float(loss.detach())


def grad_of(p: torch.Tensor) -> torch.Tensor:
    """The gradient `compute_gradients` left in `p`. A parameter the loss never reached has
    none; a step that reads it is a bug, reported here rather than as an arithmetic on None."""
    grad = p.grad
    if grad is None:
        raise RuntimeError(f"a parameter of shape {tuple(p.shape)} has no gradient: "
                           "the loss does not depend on it")
    return grad


def sgd_step(parameters: Iterable[torch.Tensor], lr: float) -> None:
    """w <- w - lr g for each of a model's `parameters` (from `model.parameters()`, or held)."""
    with torch.no_grad():
        for p in parameters:
            p.sub_(grad_of(p), alpha=lr)


@torch.no_grad()
def evaluate(model: nn.Module, x: Samples, y: np.ndarray, device: torch.device,
             batch: int = 256) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) over a whole split."""
    correct, loss_sum = 0, 0.0
    for start in range(0, len(y), batch):
        xb = torch.from_numpy(np.ascontiguousarray(x[start : start + batch])).to(device)
        yb = torch.from_numpy(np.ascontiguousarray(y[start : start + batch])).to(device)
        out = model(xb)
        loss_sum += float(F.cross_entropy(out, yb, reduction="sum"))
        correct += int((out.argmax(dim=1) == yb).sum())
    return correct / len(y), loss_sum / len(y)
