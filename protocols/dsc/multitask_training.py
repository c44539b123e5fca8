"""Local multi-task training and evaluation of a routed model
(docs/protocols/dsc.md#local-training).

Per mini-batch (x, {y_t}): for every task t of the node's portfolio draw Gumbel-softmax gates
from its logits, run the stem once and each task's route, and sum the weighted task losses
(Eq. 9-10: L_i = sum_t lambda_t L_t). The policy regularisers (lambda_sp sparsity + lambda_sh
sharing, routing_policy) are added. One backward pass; then an SGD step on the weights (backbone
and decoders, the decoders at their own `decoder_lr`, docs/protocols/dsc.md#a20) and an Adam step
on the policy logits, the two optimisers the paper names. During
`warmup_epochs` every block runs and the logits are not trained (docs/protocols/dsc.md#a4). The
Gumbel temperature decays per epoch, T_g = t0 * decay^(epochs since warm-up)
(docs/protocols/dsc.md#a15).

Task criteria (as AdaShare; the paper names only seg's cross-entropy): seg cross-entropy
ignoring `IGNORE`; sn 1 - cos over pixels
with a true normal; dep L1 over pixels with true depth > 0; kp and edge L1.

`standardise_depth` (docs/protocols/dsc.md#a20) has Dep's decoder learn the node's training
depths standardised and read back in metres; the loss and the metrics stay in metres.

Batches follow the node's `mtl/batches` stream and Gumbel noise its `mtl/gumbel` stream, and the
optimiser state lives in the trainer across rounds (SGD momentum is kept,
docs/protocols/dsc.md#a15).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from torch.nn import functional as F

from protocols.dsc.hyper import MultiTaskTrainingHyper
from protocols.dsc.routed_model import RoutedMultiTaskNet
from protocols.dsc.routing_policy import (
    execute_all,
    gumbel_gates,
    hard_gates,
    sharing_loss,
    sparsity_loss,
)
from protocols.dsc.task_metrics import meter_for
from protocols.dsc.taskdata import IGNORE, TaskSet
from protocols.sdk import numpy_stream, torch_stream


def task_loss(task: str, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if task == "seg":
        return F.cross_entropy(pred, target, ignore_index=IGNORE)
    if task == "sn":
        valid = target.norm(dim=1) > 0
        cos = (F.normalize(pred, dim=1) * F.normalize(target, dim=1)).sum(dim=1)
        return (1 - cos)[valid].mean()
    if task == "dep":
        valid = target > 0
        return (pred - target).abs()[valid].mean()
    return (pred - target).abs().mean()


def make_optimizers(model: RoutedMultiTaskNet,
                    cfg: MultiTaskTrainingHyper) -> tuple[torch.optim.SGD, torch.optim.Adam]:
    """SGD over the `shared` (at `lr`) and `decoders` (at `decoder_lr`) groups, Adam over
    `policy` (paper §V)."""
    decoder_lr = cfg.lr if cfg.decoder_lr is None else cfg.decoder_lr
    weights: list[dict[str, Any]] = [
        {"name": "shared", "params": list(model.named_group("shared").values())},
        {"name": "decoders", "params": list(model.named_group("decoders").values()),
         "lr": decoder_lr}]
    policy = [{"name": "policy", "params": list(model.named_group("policy").values())}]
    return (torch.optim.SGD(weights, lr=cfg.lr, momentum=cfg.momentum,
                            weight_decay=cfg.weight_decay),
            torch.optim.Adam(policy, lr=cfg.policy_lr))


def depth_statistics(data: TaskSet) -> tuple[float, float]:
    """(mean, std) of the valid (> 0) training depths: what Dep's decoder reads its output
    against under `standardise_depth` (docs/protocols/dsc.md#a20)."""
    depths = data.targets["dep"]
    valid = depths[depths > 0].astype(np.float64)
    if not len(valid):
        raise ValueError("standardise_depth: the node has no valid training depth")
    std = float(valid.std())
    return float(valid.mean()), std if std > 0 else 1.0


def to_tensors(data: TaskSet, idx: np.ndarray,
               device: torch.device) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a[idx])).to(device)
    return tensor(data.images), {t: tensor(y) for t, y in data.targets.items()}


class LocalTrainer:
    """E local epochs at a time on one node's data; keeps optimiser state between rounds."""

    # what a checkpoint keeps (dfl_node/state/checkpoint_codec.py)
    checkpoint_fields: ClassVar[tuple[str, ...]] = ("sgd", "adam", "batches", "gumbel",
                                                    "epochs_done")

    def __init__(self, model: RoutedMultiTaskNet, data: TaskSet, cfg: MultiTaskTrainingHyper,
                 seed: int, node: int, device: torch.device | str = "cpu") -> None:
        missing = [t for t in model.tasks if t not in data.targets]
        if missing:
            raise ValueError(f"node {node}: no labels for tasks {missing}")
        self.model, self.data, self.cfg = model, data, cfg
        if cfg.standardise_depth and "dep" in model.tasks:
            model.read_output_as("dep", *depth_statistics(data))
        self.device = torch.device(device)
        self.sgd, self.adam = make_optimizers(model, cfg)
        self.batches = numpy_stream(seed, node, "mtl/batches")
        self.gumbel = torch_stream(seed, node, "mtl/gumbel")
        self.epochs_done = 0

    @property
    def learning_policy(self) -> bool:
        return self.epochs_done >= self.cfg.warmup_epochs

    @property
    def temperature(self) -> float:
        return self.cfg.gumbel_t0 * self.cfg.gumbel_decay ** (self.epochs_done
                                                              - self.cfg.warmup_epochs)

    def run_epochs(self, epochs: int) -> float:
        """Train `epochs` epochs; the mean client loss L_i (Eq. 10) of the last one."""
        loss = float("nan")
        for _ in range(epochs):
            self.model.train()
            order = self.batches.permutation(len(self.data))
            losses = [self.step(np.sort(order[s : s + self.cfg.batch_size]))
                      for s in range(0, len(order), self.cfg.batch_size)]
            loss = float(np.mean(losses))
            self.epochs_done += 1
        return loss

    def gates(self) -> dict[str, torch.Tensor]:
        if not self.learning_policy:
            gates = execute_all(self.model.blocks)
            return {t: gates for t in self.model.tasks}
        return {t: gumbel_gates(self.model.policy_logits[t], self.temperature, self.gumbel,
                                self.cfg.straight_through) for t in self.model.tasks}

    def step(self, idx: np.ndarray) -> float:
        x, targets = to_tensors(self.data, idx, self.device)
        preds = self.model(x, self.gates())
        task_sum = sum(self.cfg.task_weights.get(t, 1.0) * task_loss(t, p, targets[t])
                       for t, p in preds.items())
        if not isinstance(task_sum, torch.Tensor):  # sum() of no terms is the int 0
            raise ValueError("dsc: the model has no task head, so there is no loss to train")
        total = task_sum
        if self.learning_policy:
            logits = list(self.model.policy_logits.values())
            total = total + self.cfg.sparsity * sparsity_loss(logits) \
                + self.cfg.sharing * sharing_loss(logits)
        self.sgd.zero_grad()
        self.adam.zero_grad()
        total.backward()
        self.sgd.step()
        if self.learning_policy:
            self.adam.step()
        return float(task_sum.detach())


@torch.no_grad()
def evaluate(model: RoutedMultiTaskNet, data: TaskSet, device: torch.device | str = "cpu",
             batch: int = 64) -> dict[str, dict[str, float]]:
    """Every task's metrics over `data` under the binary policies
    (docs/protocols/dsc.md#metrics)."""
    model.eval()
    gates = {t: hard_gates(model.policy_logits[t]) for t in model.tasks}
    meters = {t: meter_for(t, data.seg_classes) for t in model.tasks}
    for start in range(0, len(data), batch):
        x, targets = to_tensors(data, np.arange(start, min(start + batch, len(data))),
                                torch.device(device))
        for t, pred in model(x, gates).items():
            meters[t].update(pred, targets[t])
    return {t: m.result() for t, m in meters.items()}
