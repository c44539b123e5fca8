"""The differentiable semantic (JSCC) channel between encoder and decoders (paper Eq. 1-4).

Per sample, the task latent X is flattened, consecutive reals are paired into S complex symbols
and the block is normalised to average power P = 1 (x <- sqrt(S) x / ||x||). The
receiver sees y = Hx + z with z ~ CN(0, sigma^2 I), SNR = P / sigma^2, and zero-forces with CSI:
x_hat = x + (H^H H)^{-1} H^H z. With H = I (`awgn`) that is x + z; with H = diag(h),
h ~ CN(0, 1) (`rayleigh_diag`) it is x + z / h, the noise amplified by deep fades. The noise
term does not depend on x, so gradients flow through the normalisation unchanged and encoder and
decoder train as a pair. `none` passes the latent through untouched. The `model.channel` section
that selects one is `ChannelConfig` (protocols/dsc/routed_config.py).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from protocols.dsc.routed_config import AwgnChannel, ChannelConfig, NoisyChannel


class SemanticChannel(nn.Module):
    def __init__(self, spec: ChannelConfig, gen: torch.Generator) -> None:
        super().__init__()
        self.spec = spec
        self.gen = gen

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        if not isinstance(self.spec, NoisyChannel):
            return latent
        flat = latent.reshape(len(latent), -1)
        reals = flat.shape[1]
        flat = F.pad(flat, (0, reals % 2))  # pair reals into complex symbols
        symbols = flat.shape[1] // 2
        x = flat * (symbols**0.5 / flat.norm(dim=1, keepdim=True).clamp_min(1e-12))
        received = x + self.effective_noise(x.shape).to(x.device, x.dtype)
        return received[:, :reals].reshape(latent.shape)

    def effective_noise(self, shape: torch.Size) -> torch.Tensor:
        """z (AWGN) or z/h (Rayleigh + ZF) as interleaved (re, im) pairs."""
        assert isinstance(self.spec, NoisyChannel)
        sigma2 = 10.0 ** (-self.spec.snr_db / 10.0)
        z = self.complex_normal(shape, sigma2)
        if isinstance(self.spec, AwgnChannel):
            return torch.view_as_real(z).reshape(shape)
        h = self.complex_normal(shape, 1.0)
        return torch.view_as_real(z / h).reshape(shape)

    def complex_normal(self, shape: torch.Size, variance: float) -> torch.Tensor:
        """CN(0, variance): real and imaginary parts each N(0, variance / 2)."""
        parts = torch.randn((shape[0], shape[1] // 2, 2), generator=self.gen)
        return torch.view_as_complex(parts * (variance / 2) ** 0.5)
