"""The `model:` section: `{name: <model>, ...options}`, validated without torch.

Each model declares its options as a subclass of `ModelConfig` whose `name` is that model's
literal name (MODEL_SPECS, from the `dfl_mesh.models` entry points), so a spec is validated by
the model it names and an option another model has is refused. The modules themselves are built
in dfl_node/learning/models.py. This module imports no torch: the launcher validates a plan, and
checks that its model fits the data (`check_fits`), before any process imports torch (a
`dfl-launch slurm --submit` imports none at all on the way to round 1).

Names shipped: `linear`, `mlp` (option `hidden`), `cnn` (the small default for image datasets;
options `channels`, `kernel`, `padding`, `hidden`), `ssdfl-cnn` (docs/protocols/ssd-fl.md#e10)
and `dmflsq-cnn` (the DMFL-SQ paper's CNN2+FC2, P = 2,122,186 on CIFAR-10: the size that matches
its omega = 8.37e-3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import ValidationError

from dfl_config.errors import DflMeshError
from dfl_config.plugins import Plugins, discover
from dfl_config.problems import one_line, suggestion
from dfl_config.renamed import renamed_names
from dfl_config.section import Count, NonNegativeInt, Section

if TYPE_CHECKING:
    from torch import nn


class ModelError(ValueError, DflMeshError):
    pass


class ModelConfig(Section):
    """A model by name with its options. A plugin package registers a subclass under the
    `dfl_mesh.models` entry-point group, with `name: Literal["its-name"]` and `build`."""

    name: str
    """The model's builder; the launcher resolves `auto` to the dataset's default first."""

    def build(self, input_shape: tuple[int, ...], classes: int) -> nn.Module:
        """The module for one sample of `input_shape` and `classes` outputs. It is built on the
        meta device and initialised from the run's shared stream afterwards, so it must hold
        only Linear and Conv2d parameters (dfl_node/learning/models.py's reset_parameters)."""
        raise NotImplementedError(f"model {self.name!r} has no build()")

    def check(self, input_shape: tuple[int, ...], classes: int) -> None:
        """Raise ModelError (one line) if the model cannot take `input_shape` or be initialised
        from the shared stream. Default: build it on the meta device, which imports torch (so
        here, not at the top); a spec that can tell from the shape alone overrides this, as the
        shipped ones do."""
        import torch

        with torch.device("meta"):  # no memory, no initialisation
            uninitialisable(self.build(input_shape, classes))


def uninitialisable(model: nn.Module) -> None:
    """ModelError on the first layer with parameters that the shared stream cannot initialise:
    dfl_node/learning/models.py's reset_parameters fills Linear and Conv2d layers only."""
    from torch import nn

    for module in model.modules():
        if next(module.parameters(recurse=False), None) is not None and \
                not isinstance(module, nn.Linear | nn.Conv2d):
            raise ModelError(f"no shared-stream initialisation for {type(module).__name__}")


def image_shape(input_shape: Sequence[int], name: str) -> tuple[int, int, int]:
    if len(input_shape) != 3:
        raise ModelError(f"model {name!r} needs image inputs (C, H, W), got {tuple(input_shape)}")
    c, h, w = input_shape
    return c, h, w


def conv_pool_sizes(input_shape: Sequence[int], channels: Sequence[int], kernel: int,
                    padding: int) -> list[tuple[int, int]]:
    """(H, W) after each conv(kernel, padding) -> maxpool 2 stage of the `cnn` family."""
    _, h, w = image_shape(input_shape, "cnn")
    sizes = []
    for _ in channels:
        h, w = (h + 2 * padding - kernel + 1) // 2, (w + 2 * padding - kernel + 1) // 2
        if min(h, w) < 1:
            raise ModelError(f"cnn: {len(channels)} conv/pool stages do not fit "
                             f"{tuple(input_shape)}")
        sizes.append((h, w))
    return sizes


class BuiltinModelConfig(ModelConfig):
    """A model dfl_node/learning/models.py builds (BUILDERS there, by name, with the spec's
    options)."""

    def check(self, input_shape: tuple[int, ...], classes: int) -> None:
        """Nothing to check: a flat input of any shape."""

    def options(self) -> dict[str, Any]:
        """The builder's keyword arguments."""
        return self.model_dump(exclude={"name"})


class LinearConfig(BuiltinModelConfig):
    name: Literal["linear"]


class MlpConfig(BuiltinModelConfig):
    name: Literal["mlp"]
    hidden: tuple[Count, ...] = (64,)
    """Widths of the hidden layers (ReLU after each); [] is the linear model."""


class CnnConfig(BuiltinModelConfig):
    name: Literal["cnn"]
    channels: tuple[Count, ...] = (16, 32)
    """Output channels of each conv -> ReLU -> maxpool 2 stage."""
    kernel: Count = 5
    """Side of every conv kernel."""
    padding: NonNegativeInt = 0
    """Zero padding of every conv."""
    hidden: Count | None = None
    """Width of a hidden FC layer before the classifier; None: none."""

    def check(self, input_shape: tuple[int, ...], classes: int) -> None:
        conv_pool_sizes(input_shape, self.channels, self.kernel, self.padding)


class SsdflCnnConfig(BuiltinModelConfig):
    name: Literal["ssdfl-cnn"]

    def check(self, input_shape: tuple[int, ...], classes: int) -> None:
        image_shape(input_shape, self.name)


class DmflsqCnnConfig(BuiltinModelConfig):
    """The `cnn` builder with the paper's layers: 32 and 64 3x3 channels, padding 1, FC(512)."""

    name: Literal["dmflsq-cnn"]

    def options(self) -> dict[str, Any]:
        return {"channels": (32, 64), "kernel": 3, "padding": 1, "hidden": 512}

    def check(self, input_shape: tuple[int, ...], classes: int) -> None:
        options = self.options()
        conv_pool_sizes(input_shape, options["channels"], options["kernel"], options["padding"])


GIVEN_MODEL = "given"
_FACTORIES: dict[str, Callable[[], nn.Module]] = {}


def give_factory(name: str, factory: Callable[[], nn.Module]) -> None:
    """Make `factory` the model factory of `name` in this process and in every process forked
    from it afterwards (the processes backend's nodes): handed over, never imported by name."""
    _FACTORIES[name] = factory


class GivenModelConfig(ModelConfig):
    """A model a factory handed over as an object builds (`dfl_mesh.run(model=make_model)`).

    The section records what can be told of it, so that the plan says which model ran: the
    factory's qualified name, the module's architecture (its repr) and P, its parameter
    count. The factory itself is found in this process's table (`give_factory`); a process
    without it (`dfl-node` on another host) refuses the plan in one line. Every node starts
    from the same parameters: the factory is called under torch's generator seeded from the
    run's `init` stream (dfl_node/learning/models.py), its own initialisation kept."""

    name: Literal["given"]
    factory: str
    architecture: str
    parameters: NonNegativeInt

    def build(self, input_shape: tuple[int, ...], classes: int) -> nn.Module:
        factory = _FACTORIES.get(self.factory)
        if factory is None:
            raise ModelError(f"model: {self.factory} was handed over as an object to the "
                             "process that launched the run (dfl_mesh.run(model=...)); this "
                             "process has no such factory")
        return factory()

    def check(self, input_shape: tuple[int, ...], classes: int) -> None:
        """One batch of two zero samples goes through it and gives `classes` scores each."""
        import torch

        with torch.random.fork_rng(devices=[]), torch.no_grad():
            try:
                out = self.build(input_shape, classes)(torch.zeros((2, *input_shape)))
            except (RuntimeError, ValueError, TypeError) as exc:
                raise ModelError(f"model: {self.factory}() does not take samples of shape "
                                 f"{tuple(input_shape)}: {str(exc).splitlines()[0]}") from None
        if tuple(out.shape) != (2, classes):
            raise ModelError(f"model: {self.factory}() gives outputs of shape "
                             f"{tuple(out.shape)[1:]} per sample; the data has {classes} "
                             "classes")


# Every model by name: the `dfl_mesh.models` entry points, these included (pyproject.toml), so
# an installed package adds a model the way this module does.
MODELS_GROUP = "dfl_mesh.models"
_PLUGINS = discover(MODELS_GROUP)
MODEL_SPECS: dict[str, type[ModelConfig]] = {}
for _name, _spec in list(_PLUGINS.found.items()):
    if not (isinstance(_spec, type) and issubclass(_spec, ModelConfig)
            and get_args(_spec.model_fields["name"].annotation) == (_name,)):
        _PLUGINS.refuse(_name, f"is not a ModelConfig whose name is Literal[{_name!r}]")
        continue
    MODEL_SPECS[_name] = _spec


def model_plugins() -> Plugins:
    """The models group as discovered: what loaded, what clashed, what failed and why."""
    return _PLUGINS


def model_spec(spec: dict[str, Any]) -> ModelConfig:
    """`spec` validated by the model its `name` names; ModelError (one line, the option and,
    for a misspelt one, its closest known name) on an unknown model or a bad option."""
    name = spec.get("name")
    if name == GIVEN_MODEL:
        try:
            return GivenModelConfig.model_validate(spec)
        except ValidationError as exc:
            raise ModelError(one_line(exc, GivenModelConfig, ("model",))) from None
    if not isinstance(name, str) or name not in MODEL_SPECS:
        if isinstance(name, str) and _PLUGINS.unavailable(name):
            raise ModelError(_PLUGINS.why_not(name, "model"))
        known = ", ".join(sorted(MODEL_SPECS))
        raise ModelError(f"unknown model {name!r}{suggestion(str(name), MODEL_SPECS)} "
                         f"(known: {known})")
    cls = MODEL_SPECS[name]
    try:
        return cls.model_validate(spec)
    except ValidationError as exc:
        raise ModelError(one_line(exc, cls, ("model",))) from None


def check_fits(spec: dict[str, Any], input_shape: Sequence[int], classes: int) -> None:
    """ModelError (one line) unless `spec` names a model with valid options that takes
    `input_shape`."""
    model_spec(spec).check(tuple(input_shape), classes)


if not TYPE_CHECKING:  # hidden from mypy, which would otherwise take any name of the module
    # `ModelSpec`, the old name of `ModelConfig` that model plugins import
    __getattr__ = renamed_names(__name__, {"ModelSpec": (f"{__name__}.ModelConfig",
                                                         lambda: ModelConfig)})
