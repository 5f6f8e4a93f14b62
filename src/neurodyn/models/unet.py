"""The U-Net baseline of PDEBench (``UNet1d`` / ``UNet2d``), registered as ``"unet"``.

Architecture (``f = init_features``; 1D uses the same layout with 1D convolutions)::

    block(c_in, c) = [conv3x3(c_in -> c, no bias), BatchNorm, Tanh, conv3x3(c -> c, no bias), BatchNorm, Tanh]

    e1 = block(C_in, f)(x)          e2 = block(f, 2f)(pool(e1))     e3 = block(2f, 4f)(pool(e2))
    e4 = block(4f, 8f)(pool(e3))    b  = block(8f, 16f)(pool(e4))
    d4 = block(16f, 8f)([up4(b), e4])       up_k: transposed conv, kernel 2, stride 2, with bias,
    d3 = block(8f, 4f)([up3(d4), e3])             halving the channels (16f->8f, 8f->4f, 4f->2f, 2f->f)
    d2 = block(4f, 2f)([up2(d3), e2])       [a, b]: concatenation along channels
    d1 = block(2f, f)([up1(d2), e1])        pool: max-pool, kernel 2, stride 2
    y  = conv1x1(f -> C_out, with bias)(d1)

with ``C_in = in_channels + ctx_channels`` (the context vector is appended as constant channels). Parameter
count (2D, kernel area ``k = 9``; 1D: ``k = 3`` and transposed-conv kernel 2 instead of 4)::

    sum over blocks (a -> c) of  k*a*c + k*c*c + 4c        (two convs, two BatchNorms with weight and bias)
    + sum over up-convs (a -> c) of  4*a*c + c  +  f*C_out + C_out

i.e. 7,762,465 for ``UNet2d(in=1, out=1, f=32)``.

Grids whose size is not a multiple of 16 (four poolings) are padded inside the model, split as evenly as
possible between the start and the end of each axis, with ``pad_mode``: "reflect" (default; mirror without
repeating the edge, falling back to "replicate" on axes too short to mirror), "replicate", "zeros" or
"circular" (periodic data); the output is cropped back to the input size. Input and output are channels
last, ``(B, *spatial, C)``, as everywhere in neurodyn.

Readings: PDEBench's blocks and widths; ``pad_mode`` is ours (any grid size); the table is in
docs/papers/notes-chonn.md#u-net-backbone-paper-vs-code.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError, check_choice, check_min
from ..nn.grids import append_context
from ..nn.mlp import Tanh
from .inputs import check_grid_input
from .registry import register

__all__ = ["UNetConfig", "UNet"]

_LEVELS = 4
_MULTIPLE = 2**_LEVELS
_PAD_MODES = ("reflect", "replicate", "zeros", "circular")


@dataclass
class UNetConfig:
    """Configuration of ``UNet`` (PDEBench's UNet1d/UNet2d; one line per field: type, default, meaning).

    Attributes:
        in_channels (int, 1): channels of the input field (filled in from the data).
        out_channels (int, 1): channels of the output field (filled in from the data).
        dims (int, 2): spatial axes, 1 or 2.
        init_features (int, 32): channels of the first level (doubling at each of the 4 levels down).
        ctx_channels (int, 0): length of the per-sample context vector ``ctx`` (0: none).
        pad_mode (str, "reflect"): padding of sizes that are not multiples of 16: reflect | replicate | zeros |
            circular.
    """

    in_channels: int = 1
    out_channels: int = 1
    dims: int = 2
    init_features: int = 32
    ctx_channels: int = 0
    pad_mode: str = "reflect"

    def __post_init__(self) -> None:
        check_choice("UNet dims", self.dims, (1, 2))
        check_min("UNet", self, ("in_channels", "out_channels", "init_features"), 1)
        if int(self.ctx_channels) < 0:
            raise ConfigError(f"UNet ctx_channels must be >= 0; got {self.ctx_channels!r}.")
        check_choice("UNet pad_mode", self.pad_mode, _PAD_MODES)


def _block(conv: type[nn.Module], norm: type[nn.Module], c_in: int, c: int) -> nn.Sequential:
    return nn.Sequential(
        conv(c_in, c, kernel_size=3, padding=1, bias=False),
        norm(c),
        Tanh(),
        conv(c, c, kernel_size=3, padding=1, bias=False),
        norm(c),
        Tanh(),
    )


@register("unet", UNetConfig)
class UNet(nn.Module):
    """PDEBench U-Net, ``model(x, pos=None, ctx=None) -> y`` with ``x (B, *spatial, in_channels)`` and
    ``y (B, *spatial, out_channels)``; any grid size >= 1 (padded internally to a multiple of 16)."""

    def __init__(self, config: UNetConfig):
        super().__init__()
        self.config = config
        conv, norm, up, pool = {
            1: (nn.Conv1d, nn.BatchNorm1d, nn.ConvTranspose1d, nn.MaxPool1d),
            2: (nn.Conv2d, nn.BatchNorm2d, nn.ConvTranspose2d, nn.MaxPool2d),
        }[config.dims]
        f = config.init_features
        widths = [f * 2**i for i in range(_LEVELS + 1)]  # f, 2f, 4f, 8f, 16f
        c_in = config.in_channels + config.ctx_channels
        self.encoders = nn.ModuleList(_block(conv, norm, a, c) for a, c in zip([c_in] + widths[:-2], widths[:-1]))
        self.pool = pool(kernel_size=2, stride=2)
        self.bottleneck = _block(conv, norm, widths[-2], widths[-1])
        self.upconvs = nn.ModuleList(up(2 * c, c, kernel_size=2, stride=2) for c in reversed(widths[:-1]))
        self.decoders = nn.ModuleList(_block(conv, norm, 2 * c, c) for c in reversed(widths[:-1]))
        self.head = conv(f, config.out_channels, kernel_size=1)

    def _pad(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
        spatial = x.shape[2:]
        before = []
        for j in range(len(spatial) - 1, -1, -1):  # F.pad lists the last axis first
            n = spatial[j]
            total = (-n) % _MULTIPLE
            if total == 0:
                continue
            lo, hi = total // 2, total - total // 2
            pad = [0, 0] * len(spatial)
            pad[2 * (len(spatial) - 1 - j) : 2 * (len(spatial) - j)] = [lo, hi]
            mode = self.config.pad_mode
            if mode == "reflect" and max(lo, hi) >= n:
                mode = "replicate"
            x = F.pad(x, pad, mode="constant" if mode == "zeros" else mode)
            before.append((j, lo, n))
        return x, tuple(before)

    _input_name = "UNet"  # the model named in input errors

    def _stage(self, h: torch.Tensor, stage: str) -> torch.Tensor:
        """Hook on the channels-first output of every stage (``enc1..enc4``, ``bottleneck``, ``dec4..dec1``;
        encoder outputs before pooling, so also the skip connections): the identity here; ``chonn_unet``
        adds its blocks there."""
        return h

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor | None = None, ctx: torch.Tensor | None = None
    ) -> torch.Tensor:
        cfg = self.config
        check_grid_input(self._input_name, x, cfg.dims, cfg.in_channels, ctx, cfg.ctx_channels, pos, self)
        h = append_context(x, ctx).movedim(-1, 1)
        h, pads = self._pad(h.contiguous())
        skips = []
        for k, enc in enumerate(self.encoders, start=1):
            h = self._stage(enc(h), f"enc{k}")
            skips.append(h)
            h = self.pool(h)
        h = self._stage(self.bottleneck(h), "bottleneck")
        for k, up, dec, skip in zip(range(_LEVELS, 0, -1), self.upconvs, self.decoders, reversed(skips)):
            h = self._stage(dec(torch.cat([up(h), skip], dim=1)), f"dec{k}")
        y = self.head(h)
        for j, lo, n in pads:
            y = y.narrow(2 + j, lo, n)
        return y.movedim(1, -1)
