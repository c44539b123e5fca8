"""The routed multi-task model of a DSC node (paper Eq. 6; docs/protocols/dsc.md#the-model).

One residual backbone: an always-run stem, then K BasicBlocks. For task t, block k maps the
latent a to p_exec * relu(res + F_k(a)) + p_skip * res, with res the block's own shortcut
(the downsample projection where the block changes stride or width, else a): with binary gates
this is paper Eq. 6, alpha_{t,k} = u_{t,k} F_k(alpha_{t,k-1}) + alpha_{t,k-1}. The latent of each
task passes the semantic channel and then the task's private DeepLab-style ASPP decoder (parallel
dilated 3x3 convs, summed, bilinearly upsampled to the input size).

Parameters fall into three named groups, and only `shared` (stem, blocks, downsample
projections, BN gamma/beta included) is ever exchanged; decoders and policy logits are private
and BN running statistics are buffers, never parameters (docs/protocols/dsc.md#the-model). The
group sizes are
measured on the built model: ResNet-18's `shared` group is 11,176,512 float32 = 44,706,048 B,
the paper's 44.71 MB per exchange.

Initialisation: the backbone comes from the run's shared `init` stream (a common theta_0 on
every node, paper Alg. 1 step 1); decoders from the node's own stream; policy logits start at 0
(ties execute every block).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from protocols.dsc.routed_config import Backbone, RoutedModelConfig
from protocols.dsc.routing_policy import POLICY_BYTES_PER_ENTRY, binary_policy
from protocols.dsc.semantic_channel import SemanticChannel
from protocols.dsc.taskdata import output_channels
from protocols.sdk import on_cpu, reset_parameters, torch_stream

GROUPS = ("shared", "decoders", "policy")
FP32_BYTES = 4
IN_CHANNELS = 3  # RGB images


@dataclass(frozen=True)
class BackboneShape:
    """A dilated ResNet of BasicBlocks: `blocks` per stage give K = sum(blocks) routable blocks.

    `stem`: "small" (3x3 conv, stride 2) for the CPU-sized model, "imagenet" (7x7/2 conv +
    3x3/2 max-pool, as in torchvision's ResNet). Stage strides [1,2,1,1] and dilations
    [1,1,2,4] are the DeepLab variant (as AdaShare); they change no parameter count.
    """

    widths: tuple[int, ...]
    blocks: tuple[int, ...]
    strides: tuple[int, ...] = (1, 2, 1, 1)
    dilations: tuple[int, ...] = (1, 1, 2, 4)
    stem: str = "small"
    head_dilations: tuple[int, ...] = (1, 2, 3, 4)


BACKBONES: dict[Backbone, BackboneShape] = {
    # The mini run's backbone (docs/protocols/dsc.md#mini-run): ResNet-18 layout at widths
    # 8/16/24/32, output stride 4.
    "mini": BackboneShape((8, 16, 24, 32), (2, 2, 2, 2)),
    "resnet18": BackboneShape((64, 128, 256, 512), (2, 2, 2, 2), stem="imagenet",
                              head_dilations=(6, 12, 18, 24)),
    "resnet34": BackboneShape((64, 128, 256, 512), (3, 4, 6, 3), stem="imagenet",
                              head_dilations=(6, 12, 18, 24)),
}


class RoutedBlock(nn.Module):
    """A BasicBlock whose output is gated between running and skipping (AdaShare semantics)."""

    def __init__(self, c_in: int, c_out: int, stride: int, dilation: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, dilation, dilation, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, dilation, dilation, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                            nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        res = self.downsample(x)
        if not self.training and float(gate[0]) == 0.0:
            return res  # a hard skip: the block is not run at all
        run = F.relu(res + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))
        return gate[0] * run + gate[1] * res


class RoutedBackbone(nn.Module):
    def __init__(self, spec: BackboneShape, in_channels: int) -> None:
        super().__init__()
        width = spec.widths[0]
        if spec.stem == "imagenet":
            self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 7, 2, 3, bias=False),
                                      nn.BatchNorm2d(width), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
        else:
            self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, 2, 1, bias=False),
                                      nn.BatchNorm2d(width), nn.ReLU())
        blocks = []
        for c_out, count, stride, dilation in zip(spec.widths, spec.blocks, spec.strides,
                                                  spec.dilations, strict=True):
            for b in range(count):
                blocks.append(RoutedBlock(width, c_out, stride if b == 0 else 1, dilation))
                width = c_out
        self.blocks = nn.ModuleList(blocks)
        self.out_channels = width

    def route(self, h: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
        """Run the K blocks after the stem under one task's K x 2 gates."""
        for block, gate in zip(self.blocks, gates, strict=True):
            h = block(h, gate)
        return h


class AsppHead(nn.Module):
    """Parallel dilated 3x3 convs from the latent to the task's channels, summed, upsampled.

    `decoding` (shift, scale), None by default: the head's output o is read as shift + scale o,
    so that a regression target of mean `shift` and spread `scale` (depth in metres) is learned
    as a standardised one (docs/protocols/dsc.md#a20). Plain floats, not buffers: they are
    recomputed from the node's own training labels whenever its trainer is built, so neither
    the checkpoint nor the exchanged state carries them.
    """

    def __init__(self, c_in: int, c_out: int, dilations: Sequence[int]) -> None:
        super().__init__()
        self.branches = nn.ModuleList(nn.Conv2d(c_in, c_out, 3, 1, d, d) for d in dilations)
        self.decoding: tuple[float, float] | None = None

    def forward(self, latent: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        out = sum(branch(latent) for branch in self.branches)
        if self.decoding is not None:
            shift, scale = self.decoding
            out = shift + scale * out
        return F.interpolate(out, size=size, mode="bilinear", align_corners=False)


class RoutedMultiTaskNet(nn.Module):
    """`seg_classes`: the data's (the decoder of Seg has one output per class)."""

    def __init__(self, spec: RoutedModelConfig, tasks: Sequence[str], seg_classes: int,
                 channel_gen: torch.Generator | None = None) -> None:
        super().__init__()
        bspec = BACKBONES[spec.backbone]
        self.spec = spec
        self.tasks = tuple(tasks)
        self.backbone = RoutedBackbone(bspec, IN_CHANNELS)
        self.blocks = len(self.backbone.blocks)
        self.decoders = nn.ModuleDict({
            t: AsppHead(self.backbone.out_channels, output_channels(t, seg_classes),
                        bspec.head_dilations) for t in self.tasks})
        self.policy_logits = nn.ParameterDict(
            {t: nn.Parameter(torch.zeros(self.blocks, 2)) for t in self.tasks})
        self.channel = SemanticChannel(spec.channel, channel_gen or torch.Generator())

    def forward(self, x: torch.Tensor,
                gates: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Predictions for the tasks in `gates`; the stem runs once, then each task's route."""
        h = self.backbone.stem(x)
        size = (x.shape[2], x.shape[3])
        return {t: self.decoders[t](self.channel(self.backbone.route(h, g)), size)
                for t, g in gates.items()}

    def read_output_as(self, task: str, shift: float, scale: float) -> None:
        """Task `task`'s decoder output o is read as shift + scale o (`AsppHead.decoding`)."""
        head = self.decoders[task]
        assert isinstance(head, AsppHead)
        head.decoding = (shift, scale)

    def named_group(self, group: str) -> dict[str, nn.Parameter]:
        """The parameters of one of `GROUPS`, by name, in registration order."""
        owners = {"shared": "backbone", "decoders": "decoders", "policy": "policy_logits"}
        if group not in owners:
            raise ValueError(f"unknown parameter group {group!r} (known: {', '.join(GROUPS)})")
        owner = owners[group]
        return dict(self.get_submodule(owner).named_parameters(prefix=owner))

    def shared_state(self) -> dict[str, torch.Tensor]:
        """The exchanged tensors theta_i (Eq. 17), detached, in a fixed order."""
        return {name: p.detach() for name, p in self.named_group("shared").items()}

    @torch.no_grad()
    def load_shared(self, state: Mapping[str, torch.Tensor]) -> None:
        """Overwrite theta_i with mixed values; names and shapes must match exactly."""
        own = self.named_group("shared")
        if list(state) != list(own):
            raise ValueError("shared state names differ from this model's `shared` group")
        for name, p in own.items():
            if state[name].shape != p.shape:
                raise ValueError(f"{name}: shape {tuple(state[name].shape)}, "
                                 f"expected {tuple(p.shape)}")
            p.copy_(state[name])

    def shared_bytes(self) -> int:
        """fp32 payload of one PARAMS message: 4 |theta| bytes (paper §V)."""
        return FP32_BYTES * sum(p.numel() for p in self.named_group("shared").values())

    def policies(self) -> dict[str, torch.Tensor]:
        """Binary policy u_{i,t} per task, K float32 each: what a POLICY message carries."""
        return {t: binary_policy(self.policy_logits[t].detach()) for t in self.tasks}

    def policy_bytes(self) -> int:
        """4 K |T_i| bytes: 96 B for 3 tasks with K = 8 (paper §V)."""
        return POLICY_BYTES_PER_ENTRY * self.blocks * len(self.tasks)


def build_multitask_model(spec: RoutedModelConfig, tasks: Sequence[str], seg_classes: int,
                          seed: int, node: int) -> RoutedMultiTaskNet:
    """Node `node`'s model for its portfolio `tasks`, built on the meta device and then filled
    from the seeded streams only (no draw from torch's global generator)."""
    with torch.device("meta"):
        model = RoutedMultiTaskNet(spec, tasks, seg_classes,
                                   torch_stream(seed, node, "mtl/channel"))
    on_cpu(model)  # without torch's sympy-importing to_empty
    init_modules(model.backbone, torch_stream(seed, -1, "init"))
    init_modules(model.decoders, torch_stream(seed, node, "init/decoders"))
    with torch.no_grad():
        for logits in model.policy_logits.values():
            logits.zero_()
    return model


def init_modules(root: nn.Module, gen: torch.Generator) -> None:
    """Convs: torch's default bounds from `gen` (models.reset_parameters); BN: gamma 1, beta 0,
    fresh running statistics."""
    with torch.no_grad():
        for module in root.modules():
            if isinstance(module, nn.Conv2d):
                reset_parameters(module, gen)
            elif isinstance(module, nn.BatchNorm2d):
                module.reset_parameters()
