"""Model builders, chosen by name from a fixed table (never imported by a name from data).

What each name means and its options, with their defaults, are its spec model in
dfl_node/settings/model.py (the `model:` section, validated there without torch); the builders
here take a spec's options, so no default is repeated.

Initialisation draws from the run's shared `init` stream: every node starts from the same
parameters (as the papers' experiments do), whichever process, thread or host builds them.
Modules are created on the meta device and filled from that stream only, so building a model
neither consumes torch's global generator nor initialises twice.
"""

from __future__ import annotations

import copy
import itertools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from dfl_node.learning.seeds import stream_seed, torch_stream
from dfl_node.settings.model import (
    GIVEN_MODEL,
    MODEL_SPECS,
    BuiltinModelConfig,
    GivenModelConfig,
    ModelConfig,
    conv_pool_sizes,
    image_shape,
    model_spec,
    uninitialisable,
)


def linear(input_shape: Sequence[int], classes: int) -> nn.Module:
    """Multinomial logistic regression; the reference tests compare against it in numpy."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), classes))


def mlp(input_shape: Sequence[int], classes: int, hidden: Sequence[int]) -> nn.Module:
    widths = [math.prod(input_shape), *hidden]
    layers: list[nn.Module] = [nn.Flatten()]
    for a, b in itertools.pairwise(widths):
        layers += [nn.Linear(a, b), nn.ReLU()]
    layers.append(nn.Linear(widths[-1], classes))
    return nn.Sequential(*layers)


def cnn(input_shape: Sequence[int], classes: int, channels: Sequence[int], kernel: int,
        padding: int, hidden: int | None) -> nn.Module:
    """[conv(kernel) -> ReLU -> maxpool 2] per entry of `channels`, then [FC(hidden) ->] FC.

    The default (CnnConfig: 16, 32 channels, 5x5, no padding, no hidden layer) has 18.4k
    parameters on Fashion-MNIST: small enough for 20 nodes to train on 2 CPU cores in minutes.
    """
    c, h, w = image_shape(input_shape, "cnn")
    sizes = conv_pool_sizes(input_shape, channels, kernel, padding)  # ModelError unless it fits
    h, w = sizes[-1] if sizes else (h, w)
    layers: list[nn.Module] = []
    for out in channels:
        layers += [nn.Conv2d(c, out, kernel, padding=padding), nn.ReLU(), nn.MaxPool2d(2)]
        c = out
    layers.append(nn.Flatten())
    width = c * h * w
    if hidden is not None:
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    layers.append(nn.Linear(width, classes))
    return nn.Sequential(*layers)


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
    "linear": linear, "mlp": mlp, "cnn": cnn, "ssdfl-cnn": ssdfl_cnn, "dmflsq-cnn": cnn,
}


def module_of(spec: ModelConfig, input_shape: tuple[int, ...], classes: int) -> nn.Module:
    """A shipped model from its builder here, a plugin's from its spec's `build`."""
    if isinstance(spec, BuiltinModelConfig):
        return BUILDERS[spec.name](input_shape, classes, **spec.options())
    return spec.build(input_shape, classes)


KEPT_MODELS = 2  # initial models remembered per process (a process runs one plan at a time)
_built: OrderedDict[str, nn.Module] = OrderedDict()
_built_lock = threading.Lock()


def build_model(spec: dict[str, Any], input_shape: Sequence[int], classes: int,
                seed: int) -> nn.Module:
    """The named model for `input_shape` (one sample's shape), initialised from the run's
    shared `init` stream: every node of a run starts from the same one.

    So a process builds it once and hands out copies. The zygote builds the plan's model before
    it forks the nodes (launcher/backends/preload.py), and each node copies it (a fraction of a
    millisecond for the MLP) instead of building and initialising its own (7 to 9 ms: 0.4 s of
    a 100-node start on 2 cores)."""
    checked = model_spec(spec)
    key = f"{checked.model_dump_json()}|{list(input_shape)}|{classes}|{seed}"
    with _built_lock:
        template = _built.get(key)
        if template is None:
            template = _built[key] = _initialised(checked, input_shape, classes, seed)
            while len(_built) > KEPT_MODELS:
                _built.popitem(last=False)
        _built.move_to_end(key)
    return copy.deepcopy(template)


def model_bytes(spec: dict[str, Any], input_shape: Sequence[int], classes: int) -> int | None:
    """Bytes of the model's parameters and buffers; None for a model its protocol builds itself
    (DSC's routed model: not one of MODEL_SPECS, or a spec without `build`). Read off a template
    this process built already (a forked node: the zygote's), else off a build on the meta
    device (no memory; 3 to 7 ms, which every node of a 200-node start would pay)."""
    if spec.get("name") not in (*MODEL_SPECS, GIVEN_MODEL):
        return None
    checked = model_spec(spec)
    prefix = f"{checked.model_dump_json()}|{list(input_shape)}|{classes}|"
    with _built_lock:
        built = next((m for key, m in _built.items() if key.startswith(prefix)), None)
    if built is None:
        try:
            with torch.device("meta"):
                built = module_of(checked, tuple(input_shape), classes)
        except NotImplementedError:
            return None
    return sum(t.numel() * t.element_size()
               for t in itertools.chain(built.parameters(), built.buffers()))


def _initialised(checked: ModelConfig, input_shape: Sequence[int], classes: int,
                 seed: int) -> nn.Module:
    if isinstance(checked, GivenModelConfig):
        return given_module(checked, tuple(input_shape), classes, seed)
    with torch.device("meta"):
        model = module_of(checked, tuple(input_shape), classes)
    on_cpu(model)
    reset_parameters(model, torch_stream(seed, -1, "init"))
    return model


def given_module(checked: GivenModelConfig, input_shape: tuple[int, ...], classes: int,
                 seed: int) -> nn.Module:
    """A handed-over factory's module, initialised as the factory does it but from torch's
    generator seeded with the run's `init` stream (the caller's generator left as it was), so
    every node, whichever process or thread builds it, starts from the same parameters."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(stream_seed(seed, -1, "init"))
        return checked.build(input_shape, classes).to("cpu")


def on_cpu(model: nn.Module) -> None:
    """Uninitialised CPU storage for every parameter and buffer of a model built on the meta
    device (a tensor shared by two modules stays shared). `Module.to_empty` does this through
    torch's reference `empty_like`, whose first call imports sympy: 0.3 to 0.7 CPU-seconds in
    each process that builds its first model (the launcher checking a plan, the zygote, each
    host's server, a node in a fresh interpreter) against 3 ms here."""
    made: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # the meta tensor kept: its id stays
    for module in model.modules():
        for name, meta in [*module.named_parameters(recurse=False),
                           *module.named_buffers(recurse=False)]:
            if id(meta) not in made:
                cpu = torch.empty(meta.shape, dtype=meta.dtype)
                made[id(meta)] = (meta, nn.Parameter(cpu, meta.requires_grad)
                                  if isinstance(meta, nn.Parameter) else cpu)
            setattr(module, name, made[id(meta)][1])


def reset_parameters(model: nn.Module, gen: torch.Generator) -> None:
    """Weights and biases ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)): torch's default bounds for
    Linear and Conv (kaiming-uniform with a = sqrt(5)), drawn from `gen` in module order."""
    uninitialisable(model)
    with torch.no_grad():
        for module in model.modules():
            if next(module.parameters(recurse=False), None) is None:
                continue
            assert isinstance(module, nn.Linear | nn.Conv2d)
            bound = 1.0 / module.weight[0].numel() ** 0.5
            module.weight.uniform_(-bound, bound, generator=gen)
            if module.bias is not None:
                module.bias.uniform_(-bound, bound, generator=gen)
