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
        raise ValueError(
            f"resample_grid takes (batch, *grid, channels) with 1-3 grid axes matching the target "
            f"size {size}; got shape {tuple(x.shape)}"
        )
    if tuple(x.shape[1:-1]) == size:
        return x
    chw = x.movedim(-1, 1)
    if min(chw.shape[2:]) < 2 or min(size) < 2:
        out = F.interpolate(chw, size=size, mode="nearest")
    else:
        out = F.interpolate(chw, size=size, mode=_MODES[dims], align_corners=True)
    return out.movedim(1, -1)


def resample_steps(x: torch.Tensor, mask: torch.Tensor | None, length: int) -> torch.Tensor:
    """Each series' real steps, linearly interpolated to ``length`` steps: ``x (B, T, C)``, ``mask (B, T)`` (True
    on a real step; they need not be a prefix; ``None``: all real) -> ``(B, length, C)``.

    Vertex-aligned in the step index, as :func:`resample_grid`: a series of ``n`` real steps is read at positions
    ``i (n - 1) / (length - 1)``, so ``n == length`` returns the steps unchanged and a series linear in its step is
    reproduced exactly; a series of one step is repeated."""
    B, T, C = x.shape
    if mask is None:
        mask = torch.ones(B, T, dtype=torch.bool, device=x.device)
    mask = mask.bool()
    order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)  # real steps first, in their order
    packed = torch.gather(x, 1, order[..., None].expand(B, T, C))
    n = mask.sum(1).clamp_min(1).to(x.dtype)  # (B,)
    pos = torch.arange(length, device=x.device, dtype=x.dtype)[None] * ((n[:, None] - 1) / max(length - 1, 1))
    lo = pos.floor().long().clamp(0, T - 1)
    hi = (lo + 1).clamp(max=(n.long() - 1)[:, None]).clamp(0, T - 1)
    w = (pos - lo.to(x.dtype))[..., None]
    take = lambda idx: torch.gather(packed, 1, idx[..., None].expand(B, length, C))  # noqa: E731
    return take(lo) * (1 - w) + take(hi) * w
