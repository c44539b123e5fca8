"""Model builders, chosen by name from a fixed table (never imported by a name from data).

Names: `linear`, `mlp` (option `hidden`), `cnn` (the small default for image datasets; options
`channels`, `kernel`, `padding`, `hidden`), `ssdfl-cnn` (docs/protocols/ssd-fl.md#e10) and
`dmflsq-cnn` (the DMFL-SQ paper's CNN2+FC2, P = 2,122,186 on CIFAR-10: the size that matches
its omega = 8.37e-3).

Initialisation draws from the run's shared `init` stream: every node starts from the same
parameters (as the papers' experiments do), whichever process, thread or host builds them.
Modules are created on the meta device and filled from that stream only, so building a model
neither consumes torch's global generator nor initialises twice.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from dfl_node.learning.seeds import torch_stream


class ModelError(ValueError):
    pass


def image_shape(input_shape: Sequence[int], name: str) -> tuple[int, int, int]:
    if len(input_shape) != 3:
        raise ModelError(f"model {name!r} needs image inputs (C, H, W), got {tuple(input_shape)}")
    c, h, w = input_shape
    return c, h, w


def linear(input_shape: Sequence[int], classes: int) -> nn.Module:
    """Multinomial logistic regression; the reference tests compare against it in numpy."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), classes))


def mlp(input_shape: Sequence[int], classes: int, hidden: Sequence[int] = (64,)) -> nn.Module:
    widths = [math.prod(input_shape), *hidden]
    layers: list[nn.Module] = [nn.Flatten()]
    for a, b in itertools.pairwise(widths):
        layers += [nn.Linear(a, b), nn.ReLU()]
    layers.append(nn.Linear(widths[-1], classes))
    return nn.Sequential(*layers)


def cnn(input_shape: Sequence[int], classes: int, channels: Sequence[int] = (16, 32),
        kernel: int = 5, padding: int = 0, hidden: int | None = None) -> nn.Module:
    """[conv(kernel) -> ReLU -> maxpool 2] per entry of `channels`, then [FC(hidden) ->] FC.

    The default (16, 32 channels, 5x5, no padding, no hidden layer) has 18.4k parameters on
    Fashion-MNIST: small enough for 20 nodes to train on 2 CPU cores in minutes.
    """
    c, h, w = image_shape(input_shape, "cnn")
    layers: list[nn.Module] = []
    for out in channels:
        h, w = (h + 2 * padding - kernel + 1) // 2, (w + 2 * padding - kernel + 1) // 2
        if min(h, w) < 1:
            raise ModelError(f"cnn: {len(channels)} conv/pool stages do not fit {input_shape}")
        layers += [nn.Conv2d(c, out, kernel, padding=padding), nn.ReLU(), nn.MaxPool2d(2)]
        c = out
    layers.append(nn.Flatten())
    width = c * h * w
    if hidden is not None:
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    layers.append(nn.Linear(width, classes))
    return nn.Sequential(*layers)


def dmflsq_cnn(input_shape: Sequence[int], classes: int) -> nn.Module:
    """Conv(32,3x3,p1)-ReLU-pool, Conv(64,3x3,p1)-ReLU-pool, FC(512)-ReLU, FC: the dmfl-sq CNN."""
    return cnn(input_shape, classes, channels=(32, 64), kernel=3, padding=1, hidden=512)


def ssdfl_cnn(input_shape: Sequence[int], classes: int) -> nn.Module:
    """Five 3x3 convs (32-64-128-128-256, ReLU), pool after the 2nd and 4th, global avg, FC."""
    c = image_shape(input_shape, "ssdfl-cnn")[0]
    layers: list[nn.Module] = []
    for i, out in enumerate((32, 64, 128, 128, 256)):
        layers += [nn.Conv2d(c, out, 3, padding=1), nn.ReLU()]
        if i in (1, 3):
            layers.append(nn.MaxPool2d(2))
        c = out
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes))


BUILDERS: dict[str, Callable[..., nn.Module]] = {
    "linear": linear, "mlp": mlp, "cnn": cnn, "ssdfl-cnn": ssdfl_cnn, "dmflsq-cnn": dmflsq_cnn,
}


def build_model(spec: dict[str, Any], input_shape: Sequence[int], classes: int,
                seed: int) -> nn.Module:
    """Build the named model for `input_shape` (one sample's shape) and initialise it from the
    run's shared `init` stream."""
    options = {k: v for k, v in spec.items() if k != "name"}
    try:
        builder = BUILDERS[spec["name"]]
    except KeyError:
        known = ", ".join(sorted(BUILDERS))
        raise ModelError(f"unknown model {spec.get('name')!r} (known: {known})") from None
    try:
        with torch.device("meta"):
            model = builder(tuple(input_shape), classes, **options)
    except TypeError as exc:
        raise ModelError(f"model {spec['name']!r}: bad options {options}: {exc}") from None
    model.to_empty(device="cpu")
    reset_parameters(model, torch_stream(seed, -1, "init"))
    return model


def reset_parameters(model: nn.Module, gen: torch.Generator) -> None:
    """Weights and biases ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)): torch's default bounds for
    Linear and Conv (kaiming-uniform with a = sqrt(5)), drawn from `gen` in module order."""
    with torch.no_grad():
        for module in model.modules():
            if next(module.parameters(recurse=False), None) is None:
                continue
            if not isinstance(module, nn.Linear | nn.Conv2d):
                raise ModelError(f"no shared-stream initialisation for {type(module).__name__}")
            bound = 1.0 / module.weight[0].numel() ** 0.5
            module.weight.uniform_(-bound, bound, generator=gen)
            if module.bias is not None:
                module.bias.uniform_(-bound, bound, generator=gen)
