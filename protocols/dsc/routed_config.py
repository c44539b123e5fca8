"""The `model:` section of a DSC run (docs/protocols/dsc.md#the-model): the routed backbone and
the semantic channel between it and the decoders.

Apart from the modules (routed_model.py, semantic_channel.py) because the launcher validates
the section, through DSC's spec, without importing torch (protocols/declaration.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from dfl_config.section import Number, Section, tagged_union
from protocols.sdk import ModelConfig

Backbone = Literal["mini", "resnet18", "resnet34"]


class NoChannel(Section):
    """The latent reaches the decoders untouched."""

    kind: Literal["none"] = "none"


class NoisyChannel(Section):
    """A channel with noise at a fixed SNR for training and test (the paper gives no value;
    docs/protocols/dsc.md#a12)."""

    snr_db: Number = 20.0
    """SNR = P / sigma^2, in dB."""


class AwgnChannel(NoisyChannel):
    kind: Literal["awgn"] = "awgn"


class RayleighChannel(NoisyChannel):
    """Per-symbol Rayleigh fading h ~ CN(0, 1), zero-forced with CSI."""

    kind: Literal["rayleigh_diag"] = "rayleigh_diag"


if TYPE_CHECKING:
    ChannelConfig = AwgnChannel | RayleighChannel | NoChannel
else:
    ChannelConfig = tagged_union((AwgnChannel, RayleighChannel, NoChannel), "kind", "awgn")
"""The `model.channel` section, by its `kind` (awgn when none is given)."""


class RoutedModelConfig(ModelConfig):
    """The `model:` section of a DSC run (docs/protocols/dsc.md#the-model)."""

    name: Literal["routed"]
    backbone: Backbone = "mini"
    """The routed ResNet (docs/protocols/dsc.md#a13): the CPU-sized `mini` or the paper's."""
    channel: ChannelConfig = AwgnChannel(kind="awgn")
    """The semantic channel between backbone and decoders (docs/protocols/dsc.md#a12)."""
