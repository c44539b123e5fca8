"""Data poisoning: what an adversarial node trains on, as transforms of (images, labels), and
the attack success rate a backdoor is measured by.

Images are any tensor whose last two dimensions are height and width (N, H, W) or
(N, C, H, W), as the project's datasets hold them (uint8 pixels, normalised batch by batch
later), so a trigger is stamped on raw pixels, as BadNets does. Every transform returns new
tensors and leaves its inputs alone: a node's shard is shared read-only.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from protocols.robust.errors import RobustnessError


def _check_labels(labels: torch.Tensor, classes: int) -> None:
    if classes < 2:
        raise RobustnessError(f"label flipping needs at least 2 classes, got {classes}")
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= classes):
        raise RobustnessError(f"labels must lie in 0..{classes - 1}, got "
                              f"{int(labels.min())}..{int(labels.max())}")


def flip_labels(labels: torch.Tensor, classes: int,
                mapping: Mapping[int, int] | None = None) -> torch.Tensor:
    """Each label y replaced by mapping[y] (labels the mapping does not name are kept), or,
    without a mapping, by classes - 1 - y (the label flipping of ClippedGossip's experiments,
    9 - y on ten classes)."""
    _check_labels(labels, classes)
    if mapping is None:
        return (classes - 1) - labels
    bad = sorted(k for k, v in mapping.items() if not (0 <= k < classes and 0 <= v < classes))
    if bad:
        raise RobustnessError(f"label flipping: the mapping of {bad[0]} -> {mapping[bad[0]]} "
                              f"names a class outside 0..{classes - 1}")
    table = torch.arange(classes, dtype=labels.dtype, device=labels.device)
    for source, target in mapping.items():
        table[source] = target
    return table[labels]


def _patch_value(images: torch.Tensor, value: float | None) -> float:
    """The trigger's pixel value: the brightest the dtype holds (255 for uint8) or 1.0."""
    if value is not None:
        return value
    return 1.0 if images.is_floating_point() else float(torch.iinfo(images.dtype).max)


def stamp_trigger(images: torch.Tensor, size: int = 3, value: float | None = None) -> torch.Tensor:
    """The images with a `size` x `size` square of `value` in their bottom-right corner, in
    every channel (BadNets' pattern): how a backdoor is planted and how it is triggered."""
    if images.dim() < 3:
        raise RobustnessError(f"images must be (N, H, W) or (N, C, H, W), got shape "
                              f"{tuple(images.shape)}")
    height, width = images.shape[-2:]
    if not 1 <= size <= min(height, width):
        raise RobustnessError(f"the trigger's size must be in 1..{min(height, width)} for "
                              f"{height}x{width} images, got {size}")
    out = images.clone()
    out[..., height - size:, width - size:] = _patch_value(images, value)
    return out


def backdoor(images: torch.Tensor, labels: torch.Tensor, target: int, fraction: float,
             generator: torch.Generator, size: int = 3,
             value: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """round(fraction N) samples, drawn from `generator`, stamped with the trigger and labelled
    `target`; the rest unchanged."""
    if not 0 <= fraction <= 1:
        raise RobustnessError(f"backdoor: the poisoned fraction must be in [0, 1], got "
                              f"{fraction}")
    if target < 0:
        raise RobustnessError(f"backdoor: the target class must be >= 0, got {target}")
    if len(images) != len(labels):
        raise RobustnessError(f"backdoor: {len(images)} images but {len(labels)} labels")
    n = len(labels)
    chosen = torch.randperm(n, generator=generator)[:round(fraction * n)].sort().values
    chosen = chosen.to(images.device)
    out_images, out_labels = images.clone(), labels.clone()
    if len(chosen):
        out_images[chosen] = stamp_trigger(images[chosen], size, value)
        out_labels[chosen.to(labels.device)] = target
    return out_images, out_labels


def attack_success_rate(predictions: torch.Tensor, labels: torch.Tensor, target: int) -> float:
    """The share of the samples not of the target class that are predicted as the target
    (on triggered test images: the backdoor's success; on clean ones: its baseline)."""
    others = labels != target
    count = int(others.sum())
    if count == 0:
        raise RobustnessError(f"attack success rate: no sample outside the target class "
                              f"{target}")
    return int((predictions[others] == target).sum()) / count
