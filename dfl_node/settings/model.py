"""The `model:` section: `{name: <model>, ...options}`.

Each builder of dfl_node/learning/models.py declares its options as a subclass of `ModelSpec`
whose `name` is that model's literal name (MODEL_SPECS there), so a spec is validated by the
model it names and an option another model has is refused.
"""

from __future__ import annotations

from torch import nn

from dfl_config.section import Section


class ModelSpec(Section):
    """A model by name with its options. A plugin package registers a subclass under the
    `dfl_mesh.models` entry-point group, with `name: Literal["its-name"]` and `build`."""

    name: str
    """The model's builder; the launcher resolves `auto` to the dataset's default first."""

    def build(self, input_shape: tuple[int, ...], classes: int) -> nn.Module:
        """The module for one sample of `input_shape` and `classes` outputs. It is built on the
        meta device and initialised from the run's shared stream afterwards, so it must hold
        only Linear and Conv2d parameters (dfl_node/learning/models.py's reset_parameters)."""
        raise NotImplementedError(f"model {self.name!r} has no build()")
