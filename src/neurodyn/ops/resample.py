"""Resampling a channels-last field onto another grid of the same domain.

``resample_grid(x, size)``: ``x (B, *grid, C)`` with 1-3 spatial axes -> ``(B, *size, C)`` by multi-linear
interpolation, vertex-aligned (``align_corners=True``): both grids hold points on the domain's boundary,
``x_i = i / (n - 1)``, as every generator and public benchmark file here stores them. So a field that is
linear along each axis is reproduced exactly, and going from ``2n - 1`` points to ``n`` picks the shared
(even) points. An axis of one point is repeated (nearest).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

_MODES = {1: "linear", 2: "bilinear", 3: "trilinear"}


def resample_grid(x: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    """``(B, *grid, C)`` -> ``(B, *size, C)``, multi-linear and vertex-aligned (module docstring)."""
    size = tuple(int(s) for s in size)
    dims = len(size)
    if dims not in _MODES or x.dim() != dims + 2:
        raise ValueError(f"resample_grid takes (batch, *grid, channels) with 1-3 grid axes matching the target "
                         f"size {size}; got shape {tuple(x.shape)}")
    if tuple(x.shape[1:-1]) == size:
        return x
    chw = x.movedim(-1, 1)
    if min(chw.shape[2:]) < 2 or min(size) < 2:
        out = F.interpolate(chw, size=size, mode="nearest")
    else:
        out = F.interpolate(chw, size=size, mode=_MODES[dims], align_corners=True)
    return out.movedim(1, -1)
