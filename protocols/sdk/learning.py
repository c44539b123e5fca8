"""Local SGD on the node's own shard, with the settings every learning protocol shares.

The steps are counted because the virtual clock charges compute per local step: `Exchange`
takes the count since the previous exchange, so a protocol never reports its compute itself.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from dfl_node.learning.training import BatchSampler, compute_gradients, sgd_step
from dfl_node.runner.context import NodeContext


class LocalSGD:
    """The node's `batches` stream and its SGD steps on `ctx.model`."""

    checkpoint_fields: ClassVar[tuple[str, ...]] = ("batches", "steps")

    def __init__(self, ctx: NodeContext, batch_size: int, stream: str = "batches") -> None:
        self.model: nn.Module = ctx.model
        # A module's parameters are the same tensors for its whole life (a checkpoint restores
        # into them), and walking the module tree for them costs more than a small model's step.
        self._parameters = dict(self.model.named_parameters())
        self.batches = BatchSampler(ctx.data.x_train, ctx.data.y_train, batch_size,
                                    ctx.rng(stream), ctx.device)
        self.steps = 0

    def gradient(self) -> float:
        """Fill every parameter's `.grad` on the next mini-batch; the batch's loss."""
        self.steps += 1
        x, y = self.batches.next()
        return compute_gradients(self.model, x, y, self._parameters.values())

    def step(self, lr: float) -> float:
        """One SGD step, w <- w - lr g(w); the batch's loss.

        The gradients go once the step has used them: until the next step's backward pass
        makes new ones, their memory (a model's worth) serves the round's exchange instead, and
        that pass then writes each gradient into place rather than adding it to zeros kept
        from the last (the same values: 0 + g is g, bar the sign of a zero)."""
        loss = self.gradient()
        sgd_step(self._parameters.values(), lr)
        for p in self._parameters.values():
            p.grad = None
        return loss

    def take_steps(self) -> int:
        """The steps since the last call (the clock's compute for the next exchange)."""
        steps, self.steps = self.steps, 0
        return steps

    def parameters(self) -> dict[str, torch.Tensor]:
        return dict(self._parameters)
