"""Models: the papers' parameter counts, output shapes, and the shared initialisation."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

from dfl_node.learning import models
from dfl_node.learning.models import build_model, reset_parameters
from dfl_node.settings.model import ModelConfig, ModelError, check_fits, model_spec

FMNIST, CIFAR = (1, 28, 28), (3, 32, 32)
CASES = [("linear", (32,)), ("mlp", (32,)), ("mlp", FMNIST)] + [
    (name, shape) for name in ("cnn", "ssdfl-cnn", "dmflsq-cnn") for shape in (FMNIST, CIFAR)]


def count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_dmflsq_cnn_has_the_inferred_parameter_count() -> None:
    assert count(build_model({"name": "dmflsq-cnn"}, CIFAR, 10, 0)) == 2_122_186


@pytest.mark.parametrize(("shape", "first_conv"), [(FMNIST, 1 * 32 * 9 + 32),
                                                   (CIFAR, 3 * 32 * 9 + 32)])
def test_ssdfl_cnn_layers(shape: tuple[int, ...], first_conv: int) -> None:
    convs = [first_conv, 32 * 64 * 9 + 64, 64 * 128 * 9 + 128, 128 * 128 * 9 + 128,
             128 * 256 * 9 + 256]
    model = build_model({"name": "ssdfl-cnn"}, shape, 10, 0)
    assert [m.out_channels for m in model.modules() if isinstance(m, nn.Conv2d)] == [
        32, 64, 128, 128, 256]
    assert count(model) == sum(convs) + 256 * 10 + 10


def test_default_cnn_is_small() -> None:
    # conv(1->16, 5x5), conv(16->32, 5x5), FC(32*4*4 -> 10)
    assert count(build_model({"name": "cnn"}, FMNIST, 10, 0)) == 416 + 12_832 + 5_130


@pytest.mark.parametrize(("name", "shape"), CASES)
def test_forward_gives_one_logit_per_class(name: str, shape: tuple[int, ...]) -> None:
    model = build_model({"name": name}, shape, 10, 0)
    out = model(torch.randn(4, *shape))
    assert out.shape == (4, 10)
    assert torch.isfinite(out).all()


def test_model_options_reach_the_builder() -> None:
    model = build_model({"name": "cnn", "channels": [8], "kernel": 3, "padding": 1,
                         "hidden": 20}, CIFAR, 7, 0)
    assert model(torch.randn(2, *CIFAR)).shape == (2, 7)
    assert count(model) == (3 * 8 * 9 + 8) + (8 * 16 * 16 * 20 + 20) + (20 * 7 + 7)


@pytest.mark.parametrize(("name", "shape"), CASES)
def test_same_seed_same_init_other_seed_other_init(name: str, shape: tuple[int, ...]) -> None:
    torch.manual_seed(1)
    a = build_model({"name": name}, shape, 10, seed=3).state_dict()
    torch.manual_seed(2)  # the global generator plays no part
    b = build_model({"name": name}, shape, 10, seed=3).state_dict()
    c = build_model({"name": name}, shape, 10, seed=4).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert all(not torch.equal(a[k], c[k]) for k in a)


def test_building_leaves_the_global_generator_alone() -> None:
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    build_model({"name": "dmflsq-cnn"}, CIFAR, 10, 0)
    assert torch.equal(torch.rand(3), expected)


def test_init_uses_torch_default_bounds() -> None:
    model = build_model({"name": "ssdfl-cnn"}, CIFAR, 10, 0)
    for module in model.modules():
        if isinstance(module, nn.Conv2d | nn.Linear):
            bound = module.weight[0].numel() ** -0.5
            assert module.weight.abs().max() <= bound
            assert module.weight.abs().max() > 0.9 * bound
            assert module.bias is not None and module.bias.abs().max() <= bound


@pytest.mark.parametrize(
    ("spec", "shape", "message"),
    [({"name": "resnet"}, CIFAR, "unknown model"), ({"name": "mlp", "width": 3}, FMNIST,
                                                     "model.width: unknown key"),
     ({"name": "cnn"}, (32,), "needs image inputs"),
     ({"name": "cnn", "channels": [8, 8, 8, 8]}, FMNIST, "do not fit"),
     ({"name": "dmflsq-cnn"}, (3, 2, 2), "do not fit"),
     ({"name": "ssdfl-cnn"}, (784,), "needs image inputs")],
)
def test_bad_model_specs_are_errors(spec: dict, shape: tuple[int, ...], message: str) -> None:
    """Both when a node builds the model and when the launcher checks the plan without torch."""
    with pytest.raises(ModelError, match=message):
        build_model(spec, shape, 10, 0)
    with pytest.raises(ModelError, match=message):
        check_fits(spec, shape, 10)


@pytest.mark.parametrize(("name", "shape"), CASES)
def test_every_model_that_builds_passes_the_check(name: str, shape: tuple[int, ...]) -> None:
    build_model({"name": name}, shape, 10, 0)
    check_fits({"name": name}, shape, 10)


class NormedConfig(ModelConfig):
    """A plugin's model whose own `build` has a layer the shared stream cannot initialise."""

    name: str = "normed"

    def build(self, input_shape: tuple[int, ...], classes: int) -> nn.Module:
        return nn.Sequential(nn.Flatten(), nn.Linear(4, classes), nn.BatchNorm1d(classes))


def test_a_model_with_its_own_build_is_checked_by_building_it_on_the_meta_device() -> None:
    with pytest.raises(ModelError, match="no shared-stream initialisation for BatchNorm1d"):
        NormedConfig().check((4,), 3)


def test_a_layer_without_shared_init_is_refused() -> None:
    with pytest.raises(ModelError, match="BatchNorm2d"):
        reset_parameters(nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)), torch.Generator())


def test_each_build_is_an_own_copy_of_the_one_initial_model() -> None:
    spec, shape = {"name": "mlp", "hidden": [16]}, (1, 28, 28)
    first = build_model(spec, shape, 10, seed=7)
    with torch.no_grad():
        next(first.parameters()).add_(1.0)  # a node trains its own copy ...
    second = build_model(spec, shape, 10, seed=7)  # ... and the next node starts afresh
    fresh = models._initialised(model_spec(spec), shape, 10, seed=7)
    for a, b, c in zip(first.parameters(), second.parameters(), fresh.parameters(), strict=True):
        assert a.data_ptr() != b.data_ptr() and b.requires_grad
        assert torch.equal(b, c)  # bit for bit the model built from the stream
    assert not torch.equal(next(first.parameters()), next(second.parameters()))
    for seed in range(models.KEPT_MODELS + 1):  # older templates are let go
        build_model(spec, shape, 10, seed=seed)
    assert len(models._built) == models.KEPT_MODELS


def test_materialising_keeps_tied_tensors_tied_and_buffers_as_they_were() -> None:
    with torch.device("meta"):
        first, second = nn.Linear(4, 4), nn.Linear(4, 4)
        second.weight = first.weight  # tied, as an encoder's and a decoder's embedding may be
        model = nn.Sequential(first, second, nn.BatchNorm1d(4))
        model[2].register_buffer("scratch", torch.zeros(2), persistent=False)
        model[1].bias.requires_grad_(False)
    models.on_cpu(model)
    assert all(t.device.type == "cpu" for t in [*model.parameters(), *model.buffers()])
    assert model[1].weight is model[0].weight
    assert len(list(model.parameters())) == 5  # the tied weight counted once
    assert not model[1].bias.requires_grad and model[0].bias.requires_grad
    assert "scratch" not in model.state_dict() and "2.running_mean" in model.state_dict()


def test_a_first_model_imports_no_sympy() -> None:
    """torch's own meta-to-CPU path imports sympy, a third of a second in every process."""
    code = ("import sys; from dfl_node.learning.models import build_model; "
            "build_model({'name': 'cnn'}, (1, 28, 28), 10, 0); print('sympy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
