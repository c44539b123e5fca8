"""Per-task routing policies over the K shared blocks (docs/protocols/dsc.md#a4; AdaShare).

Each task holds a K x 2 logit matrix, columns (execute, skip). Training samples soft gates with
Gumbel-softmax at temperature T_g; evaluation and the affinity of paper Eq. 7 use the binary
policy u_{t,k} = 1[logit_exec >= logit_skip] (ties execute, so fresh zero logits run every
block). A gate row (p_exec, p_skip) feeds the block output p_exec*run + p_skip*shortcut.

Without pressure towards skipping every policy drifts to "execute all", all affinities become 1
and the similarity protocol degenerates to FedAvg (docs/protocols/dsc.md#a4), hence the two
AdaShare
regularisers on the logits: sparsity (cross-entropy towards "skip") and sharing (a
position-weighted L1 between tasks' execute logits, weighted (K-k)/K so that the bottom blocks
are pushed hardest to be shared, AdaShare Eq. 4).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from torch.nn import functional as F

EXECUTE, SKIP = 0, 1
POLICY_BYTES_PER_ENTRY = 4  # one float32 per block and task (paper §V: 96 B for 3 tasks, K = 8)


def binary_policy(logits: torch.Tensor) -> torch.Tensor:
    """u in {0, 1}^K as float32: 1 where the execute logit is at least the skip logit."""
    return (logits[:, EXECUTE] >= logits[:, SKIP]).to(torch.float32)


def hard_gates(logits: torch.Tensor) -> torch.Tensor:
    u = binary_policy(logits.detach())
    return torch.stack([u, 1 - u], dim=1)


def execute_all(blocks: int) -> torch.Tensor:
    """Gates that run every block: the warm-up phase before policies are learned
    (docs/protocols/dsc.md#a4)."""
    return hard_gates(torch.zeros(blocks, 2))


def gumbel_gates(logits: torch.Tensor, temperature: float, gen: torch.Generator,
                 straight_through: bool = False) -> torch.Tensor:
    """Gumbel-softmax sample of the K x 2 gates; noise from the node's own generator."""
    uniform = torch.rand(logits.shape, generator=gen, dtype=logits.dtype).to(logits.device)
    gumbel = -torch.log(-torch.log(uniform.clamp_min(1e-10)))  # rand() < 1, so -log(u) > 0
    soft = F.softmax((logits + gumbel) / temperature, dim=1)
    if not straight_through:
        return soft
    hard = F.one_hot(soft.argmax(dim=1), 2).to(soft.dtype)
    return hard - soft.detach() + soft


def sparsity_loss(logits: Sequence[torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy of every task's K decisions towards "skip"."""
    return torch.stack([F.cross_entropy(x, torch.full((len(x),), SKIP, device=x.device))
                        for x in logits]).mean()


def sharing_loss(logits: Sequence[torch.Tensor]) -> torch.Tensor:
    """sum_{t<t'} sum_k (K-k)/K |a_{t,k} - a_{t',k}| over execute logits, k = 1..K."""
    if len(logits) < 2:
        return logits[0].sum() * 0.0
    k = len(logits[0])
    weights = (k - torch.arange(1, k + 1, dtype=logits[0].dtype, device=logits[0].device)) / k
    return torch.stack([(weights * (a[:, EXECUTE] - b[:, EXECUTE]).abs()).sum()
                        for a, b in itertools.combinations(logits, 2)]).sum()
