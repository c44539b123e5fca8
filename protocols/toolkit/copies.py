"""Public copies: the compressed-innovation state that DMFL-SQ and CHOCO-SGD share.

A node i keeps x_hat_i (the copy of its own model every neighbour holds) and x_hat_j for each
neighbour j. It sends C(v - x_hat_i) and adds the same compressed vector to x_hat_i; every
neighbour adds it to its x_hat_i. The copies agree bit for bit across processes only if the
sender adds exactly what the receivers decode, so the sender decodes the very wire tensors it
sends with the receivers' `Compressor.decompress` instead of adding its float32 input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

import numpy as np
import torch

from protocols.toolkit.compressors import Compressed, Compressor

WireTensors = Mapping[str, np.ndarray | torch.Tensor]


class PublicCopies:
    """x_hat_i and x_hat_j (j in N_i), flat float32 vectors of length P."""

    # saved by dfl_node/state/checkpoint_codec.py
    checkpoint_fields: ClassVar[tuple[str, ...]] = ("own", "of", "gen")

    def __init__(self, compressor: Compressor, neighbors: list[int], init: torch.Tensor,
                 gen: torch.Generator | None) -> None:
        self.compressor = compressor
        self.size = int(init.numel())
        self.own = init.detach().to(torch.float32).clone()
        self.of = {j: self.own.clone() for j in neighbors}
        self.gen = gen

    def innovation(self, v: torch.Tensor) -> torch.Tensor:
        """v - x_hat_i: what the next message would carry before compression."""
        return v - self.own.to(v.device)

    def publish(self, s: torch.Tensor) -> Compressed:
        """Compress `s`, add the decoded message to x_hat_i, return it for the wire."""
        compressed = self.compressor.compress(s, gen=self.gen)
        decoded = self.compressor.decompress(compressed.tensors, self.size)
        self.own.add_(decoded.to(self.own.device))
        return compressed

    def absorb(self, received: Mapping[int, WireTensors | None]) -> None:
        """x_hat_j += C_j for every neighbour whose message arrived (sorted j; silence: none)."""
        for j in sorted(self.of):
            message = received.get(j)
            if message is not None:
                decoded = self.compressor.decompress(message, self.size)
                self.of[j].add_(decoded.to(self.of[j].device))

    def validator(self) -> Callable[[Mapping[str, np.ndarray]], None]:
        """A Comm payload validator: refuse a message that is not a well-formed C(.) of P."""
        return lambda tensors: self.compressor.validate(tensors, self.size)

    def state(self, own_name: str, neighbor_prefix: str) -> dict[str, torch.Tensor]:
        out = {own_name: self.own.detach().cpu()}
        for j, copy in self.of.items():
            out[f"{neighbor_prefix}{j}"] = copy.detach().cpu()
        return out
