"""Kernel probes: small networks that each exercise one kind of kernel the emulator prices.

A zoo model's step mixes every kind of kernel (convolutions, depthwise
convolutions, normalisations, pools, streaming elementwise ops, many small
calls), so step times of a handful of models leave the kinds' speeds
entangled: a fit can trade a fast depthwise kernel for a slow cache and
predict the next model badly. Each probe here is dominated by one kind, so
profile_device's bench times the kinds themselves, as an operator-level
profiler (nn-Meter, Zhang et al., MobiSys 2021) times kernels rather than
whole networks. The probes are not zoo models: they are never what a
leave-one-model-out check holds out, and they train like one (the same
measured step, loss and optimizer).

Each probe runs at two batch sizes (`BATCHES`), small and large, so that
what a kernel pays per step (dispatch, its weights) separates from what it
pays per sample; `stream_big` spills its activations out of the cache to
pin the DRAM bandwidth.

| probe        | dominated by                                               |
|--------------|------------------------------------------------------------|
| conv3x3      | k x k stride-1 convolutions (Winograd-able, im2col)         |
| conv1x1      | 1x1 convolutions (a GEMM over pixels)                      |
| strided      | stride-2 convolutions                                      |
| linear       | fully connected layers (weights streamed every step)       |
| depthwise    | 3x3 depthwise convolutions                                 |
| norm         | batch normalisation                                        |
| stream       | streaming elementwise ops (scale, ReLU, hardswish) in cache |
| stream_big   | the same on activations that outgrow the cache (DRAM)      |
| maxpool      | 3x3 and 2x2 max pools                                      |
| avgpool      | 3x3 and 2x2 average pools                                  |
| calls        | many tiny layers: per-call dispatch and per-step overhead  |
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from fedbench.errors import FedbenchError

PREFIX = "probe_"  # bench case names: probe_conv3x3@16
BATCHES = (4, 16)


class _Scale(nn.Module):
    """A per-channel scale: one streaming multiply (and a reduction for its gradient)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels, 1, 1))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.weight


def _head(channels: int) -> list[nn.Module]:
    return [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10)]


def _stream(channels: int) -> nn.Module:
    return nn.Sequential(
        _Scale(channels),
        nn.ReLU(),
        _Scale(channels),
        nn.Hardswish(),
        _Scale(channels),
        nn.ReLU(),
        *_head(channels),
    )


@dataclass(frozen=True)
class Probe:
    build: Callable[[], nn.Module]
    input_shape: tuple[int, ...]


PROBES: dict[str, Probe] = {
    "conv3x3": Probe(
        lambda: nn.Sequential(
            nn.Conv2d(16, 32, 3, padding=1), nn.Conv2d(32, 32, 3, padding=1), *_head(32)
        ),
        (16, 32, 32),
    ),
    "conv1x1": Probe(
        lambda: nn.Sequential(nn.Conv2d(64, 128, 1), nn.Conv2d(128, 128, 1), *_head(128)),
        (64, 16, 16),
    ),
    "strided": Probe(
        lambda: nn.Sequential(nn.Conv2d(32, 64, 3, 2, 1), nn.Conv2d(64, 64, 3, 2, 1), *_head(64)),
        (32, 32, 32),
    ),
    "linear": Probe(
        lambda: nn.Sequential(nn.Linear(1024, 1024), nn.Linear(1024, 1024), nn.Linear(1024, 10)),
        (1024,),
    ),
    "depthwise": Probe(
        lambda: nn.Sequential(
            _Scale(64),
            nn.Conv2d(64, 64, 3, padding=1, groups=64),
            nn.Conv2d(64, 64, 3, padding=1, groups=64),
            *_head(64),
        ),
        (64, 32, 32),
    ),
    "norm": Probe(
        lambda: nn.Sequential(
            nn.BatchNorm2d(64), nn.BatchNorm2d(64), nn.BatchNorm2d(64), *_head(64)
        ),
        (64, 32, 32),
    ),
    "stream": Probe(lambda: _stream(64), (64, 32, 32)),
    "stream_big": Probe(lambda: _stream(64), (64, 64, 64)),
    "maxpool": Probe(
        lambda: nn.Sequential(_Scale(64), nn.MaxPool2d(3, 1, 1), nn.MaxPool2d(2, 2), *_head(64)),
        (64, 32, 32),
    ),
    "avgpool": Probe(
        lambda: nn.Sequential(_Scale(64), nn.AvgPool2d(3, 1, 1), nn.AvgPool2d(2, 2), *_head(64)),
        (64, 32, 32),
    ),
    "calls": Probe(
        lambda: nn.Sequential(*(nn.Linear(16, 16) for _ in range(24)), nn.Linear(16, 10)),
        (16,),
    ),
}


def probe_names() -> list[str]:
    """Bench names of every probe (`probe_conv3x3`, ...)."""
    return [PREFIX + name for name in PROBES]


def probe_cases(names: Sequence[str] | None = None) -> list[str]:
    """The probes called `names` (unprefixed; default: all) at both batch sizes, as bench cases."""
    chosen = list(PROBES) if names is None else list(names)
    unknown = [n for n in chosen if n not in PROBES]
    if unknown:
        raise FedbenchError(f"unknown kernel probes {unknown}; valid: {', '.join(PROBES)}")
    return [f"{PREFIX}{name}@{b}" for name in chosen for b in BATCHES]


def is_probe(name: str) -> bool:
    return name.startswith(PREFIX) and name[len(PREFIX) :] in PROBES


def build_probe(name: str) -> tuple[nn.Module, tuple[int, ...]]:
    """The probe network called `name` (with its prefix) and its input shape."""
    probe = PROBES[name[len(PREFIX) :]]
    torch.manual_seed(0)  # the same weights on every device
    return probe.build(), probe.input_shape
