"""One flat float32 vector for a model's parameters, and back.

Top-k, the trigger norm and the neighbour copies act on the whole flattened parameter vector
(global selection: the paper charges ceil(log2 P) bits per index, i.e. positions address all P
entries). The order is the order of `params` (e.g. `model.parameters()`), the same in every
process that builds the same model.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


def flatten(params: Iterable[torch.Tensor]) -> torch.Tensor:
    """A new flat float32 tensor holding `params` in order (on their device, detached)."""
    return torch.cat([p.detach().reshape(-1) for p in _float32_list(params)])


def unflatten_into(params: Iterable[torch.Tensor], flat: torch.Tensor) -> None:
    """Copy `flat` back into `params` in place (each parameter keeps its storage and device)."""
    params = _float32_list(params)
    total = sum(p.numel() for p in params)
    if flat.dim() != 1 or flat.numel() != total:
        raise ValueError(f"flat vector has shape {tuple(flat.shape)}, parameters hold {total}")
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(flat[offset : offset + p.numel()].view_as(p))
            offset += p.numel()


def _float32_list(params: Iterable[torch.Tensor]) -> list[torch.Tensor]:
    listed = list(params)
    if not listed or any(p.dtype != torch.float32 for p in listed):
        raise ValueError("expected a non-empty sequence of float32 parameters")
    return listed
