"""DCGAN (Radford et al., 2016) packaged as one module whose forward costs a GAN step.

A GAN training step is two updates: the discriminator on real and (detached)
generated images, then the generator through the discriminator. To let the
generic one-loss, one-backward step of fedbench measure that cost,
`DCGANStep.forward(real)` draws noise, generates a batch, and returns the
discriminator's logits on the real batch, on the detached fake batch and on
the fake batch again, as columns of a (batch, 3) tensor. Any loss over those
three columns back-propagates through the discriminator three times and the
generator once: the operators of a D step plus a G step. (The gradients
mix both players, so use `gan_losses` and two optimizers to actually train
a GAN.)

Defaults follow the paper's architecture scaled to 32x32 CIFAR images:
transposed convs 100 -> 256 -> 128 -> 64 -> 3 with BN + ReLU and tanh,
mirrored strided convs with LeakyReLU(0.2) in the discriminator; generator
1.07M parameters (seed paper 000 lists DCGAN at 1M), discriminator 0.66M.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedbench.errors import FedbenchError


def _stages(image_size: int) -> int:
    stages = image_size.bit_length() - 3  # 4x4 -> image_size by doubling
    if image_size < 8 or 4 << stages != image_size:
        raise FedbenchError(f"DCGAN image_size={image_size}: must be a power of two >= 8")
    return stages


def generator(image_size: int, channels: int, nz: int, ngf: int) -> nn.Sequential:
    stages = _stages(image_size)
    width = ngf * 2 ** (stages - 1)
    layers: list[nn.Module] = [
        nn.ConvTranspose2d(nz, width, 4, 1, 0, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(),
    ]
    for _ in range(stages - 1):
        layers += [
            nn.ConvTranspose2d(width, width // 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(width // 2),
            nn.ReLU(),
        ]
        width //= 2
    layers += [nn.ConvTranspose2d(width, channels, 4, 2, 1, bias=False), nn.Tanh()]
    return nn.Sequential(*layers)


def discriminator(image_size: int, channels: int, ndf: int) -> nn.Sequential:
    stages = _stages(image_size)
    layers: list[nn.Module] = [
        nn.Conv2d(channels, ndf, 4, 2, 1, bias=False),
        nn.LeakyReLU(0.2),
    ]
    width = ndf
    for _ in range(stages - 1):
        layers += [
            nn.Conv2d(width, width * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(width * 2),
            nn.LeakyReLU(0.2),
        ]
        width *= 2
    layers += [nn.Conv2d(width, 1, 4, 1, 0, bias=False), nn.Flatten()]
    return nn.Sequential(*layers)


class DCGANStep(nn.Module):
    def __init__(
        self, image_size: int = 32, channels: int = 3, nz: int = 100, ngf: int = 64, ndf: int = 64
    ) -> None:
        super().__init__()
        self.nz = nz
        self.generator = generator(image_size, channels, nz, ngf)
        self.discriminator = discriminator(image_size, channels, ndf)

    def forward(self, real: Tensor) -> Tensor:
        z = torch.randn(real.shape[0], self.nz, 1, 1, dtype=real.dtype, device=real.device)
        fake = self.generator(z)
        d_real = self.discriminator(real)
        d_fake_for_d = self.discriminator(fake.detach())
        d_fake_for_g = self.discriminator(fake)
        return torch.cat([d_real, d_fake_for_d, d_fake_for_g], dim=1)


def gan_losses(logits: Tensor) -> tuple[Tensor, Tensor]:
    """(discriminator loss, generator loss) of the non-saturating GAN from DCGANStep's output."""
    ones = torch.ones_like(logits[:, 0])
    d_loss = F.binary_cross_entropy_with_logits(
        logits[:, 0], ones
    ) + F.binary_cross_entropy_with_logits(logits[:, 1], torch.zeros_like(ones))
    g_loss = F.binary_cross_entropy_with_logits(logits[:, 2], ones)
    return d_loss, g_loss
