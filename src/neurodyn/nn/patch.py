"""ViT-style patch embedding and un-embedding of channels-last 2-D grids (LaMO's regular-grid tokens).

``PatchEmbed2d``: ``(B, H, W, C) -> (B, H/p, W/p, D)``, a learned linear map of every non-overlapping
``p x p`` patch (``D x (p p C)`` weights plus a bias), then LayerNorm(D) (LaMO's ``Patchify``). It is the
special case of the slice encoder in which point i belongs to patch j with weight one (paper Remark 3.1).

``PatchUnembed2d``: ``(B, H/p, W/p, D) -> (B, H, W, C_out)``: LayerNorm(D), a learned bias added in token
space, then a linear map of each token to a ``p x p x C_out`` patch (LaMO's ``DePatchify``: its bias lives
on the token side, ``y = W^T (LN(z) + b)``; the same function as an output bias ``W^T b``).

``pad_to_multiple`` zero-pads the right and bottom of a grid (85 -> 88 for Darcy in the authors' code) and
``crop`` removes it again. ``resize_pos_embed`` resizes a learned ``(1, h, w, D)`` positional embedding of the
token grid bilinearly to another token grid; ``patch_forward`` runs the whole token path of a patch model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError

__all__ = ["PatchEmbed2d", "PatchUnembed2d", "pad_to_multiple", "crop", "resize_pos_embed", "patch_forward"]


def pad_to_multiple(x: torch.Tensor, multiple: int) -> tuple[torch.Tensor, tuple[int, int]]:
    """Zero-pad a ``(B, H, W, C)`` grid at the bottom/right to multiples of ``multiple``; return it and (H, W)."""
    h, w = x.shape[1], x.shape[2]
    ph, pw = (-h) % multiple, (-w) % multiple
    if ph or pw:
        x = F.pad(x, (0, 0, 0, pw, 0, ph))
    return x, (h, w)


def crop(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    return x[:, : size[0], : size[1]]


def resize_pos_embed(pe: torch.Tensor, hw: tuple[int, int]) -> torch.Tensor:
    """A ``(1, h, w, D)`` positional embedding at the token grid ``hw``: itself, or bilinearly resized."""
    hw = tuple(int(s) for s in hw)
    if tuple(pe.shape[1:3]) == hw:
        return pe
    return F.interpolate(pe.permute(0, 3, 1, 2), size=hw, mode="bilinear", align_corners=False).permute(0, 2, 3, 1)


def patch_forward(
    a: torch.Tensor, multiple: int, patch: nn.Module, blocks, unpatch: nn.Module, pos_embed=None
) -> torch.Tensor:
    """The token path of a patch model on a channels-last grid ``a (B, H, W, c) -> (B, H, W, C_out)``::

        z = patch(pad(a))  [+ pos_embed((h, w))]     # (B, h, w, D) tokens, pad: zeros to multiples of ``multiple``
        z = block_L( ... block_1(z))
        u = crop(unpatch(z))                          # back to (H, W)

    ``pos_embed``: None or a function of the token grid ``(h, w)`` returning ``(1, h, w, D)`` or None.
    """
    a, size = pad_to_multiple(a, multiple)
    z = patch(a)
    pe = pos_embed(tuple(z.shape[1:3])) if pos_embed is not None else None
    if pe is not None:
        z = z + pe
    for blk in blocks:
        z = blk(z)
    return crop(unpatch(z), size)


class PatchEmbed2d(nn.Module):
    """Non-overlapping ``p x p`` patches of ``(B, H, W, C)`` -> tokens ``(B, H/p, W/p, D)`` (+ LayerNorm)."""

    def __init__(self, in_channels: int, dim: int, patch_size: int = 2, norm: bool = True):
        super().__init__()
        if patch_size < 1:
            raise ConfigError(f"patch_size must be >= 1, got {patch_size}.")
        self.p, self.in_channels, self.dim = int(patch_size), int(in_channels), int(dim)
        self.proj = nn.Linear(self.p * self.p * self.in_channels, self.dim)
        self.norm = nn.LayerNorm(self.dim) if norm else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        p = self.p
        if h % p or w % p or c != self.in_channels:
            raise ValueError(
                f"patch embedding with patch {p} and {self.in_channels} channels got a grid of shape "
                f"{tuple(x.shape)}; H and W must be multiples of {p} (pad first)."
            )
        x = x.reshape(b, h // p, p, w // p, p, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h // p, w // p, p * p * c)
        return self.norm(self.proj(x))


class PatchUnembed2d(nn.Module):
    """Tokens ``(B, h, w, D)`` -> grid ``(B, h p, w p, C_out)``: LayerNorm, token-side bias, linear to patches."""

    def __init__(self, dim: int, out_channels: int, patch_size: int = 2):
        super().__init__()
        self.p, self.dim, self.out_channels = int(patch_size), int(dim), int(out_channels)
        self.norm = nn.LayerNorm(self.dim)
        self.bias = nn.Parameter(torch.zeros(self.dim))
        lin = nn.Linear(self.dim, self.p * self.p * self.out_channels, bias=False)
        self.weight = lin.weight  # (p p C_out, D)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        b, h, w, _ = z.shape
        p, c = self.p, self.out_channels
        y = F.linear(self.norm(z) + self.bias, self.weight)  # (b, h, w, p p c)
        return y.reshape(b, h, w, p, p, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h * p, w * p, c)
