"""Coordinate and context channels appended to channels-last grid inputs (parameter-free).

Every grid model builds its lifting input the same way, ``[x, ctx, coordinates]`` along the last axis:

* :func:`append_context`: a per-sample context vector ``ctx (B, n)`` as ``n`` constant channels;
* :func:`grid_channels`: ``linspace(0, 1, n_j)`` per axis, endpoints included (FNO, LaMO, GeoMaNO, Transolver);
* :func:`periodic_grid`: ``i / n_j`` in [0, 1) per axis, the points of a periodic cell (FFNO, ST-SSM);
* :func:`unified_position`: distances to an ``r x r`` reference grid (Transolver's ``unified_pos``, GeoMaNO).
"""

from __future__ import annotations

import torch

__all__ = ["append_context", "grid_channels", "periodic_grid", "unified_position"]


def append_context(x: torch.Tensor, ctx: torch.Tensor | None) -> torch.Tensor:
    """Channels-last ``x (B, *S, C)`` with ``ctx (B, n)`` appended as ``n`` constant channels."""
    if ctx is None:
        return x
    b, *spatial, _ = x.shape
    c = ctx.to(dtype=x.dtype).view(b, *([1] * len(spatial)), -1).expand(b, *spatial, ctx.shape[-1])
    return torch.cat([x, c], dim=-1)


def grid_channels(spatial: tuple[int, ...], batch: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``(B, *spatial, d)`` normalised coordinates, ``linspace(0, 1, n_j)`` along axis j."""
    axes = [torch.linspace(0.0, 1.0, n, dtype=dtype, device=device) for n in spatial]
    grid = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)
    return grid.unsqueeze(0).expand(batch, *spatial, len(spatial))


def periodic_grid(spatial: tuple[int, ...], batch: int, dtype: torch.dtype, device) -> torch.Tensor:
    """``(B, *spatial, d)`` coordinates ``i / n_a`` in [0, 1) along each axis (grid points of a periodic cell)."""
    axes = [torch.arange(n, dtype=dtype, device=device) / n for n in spatial]
    grid = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)
    return grid.unsqueeze(0).expand(batch, *spatial, len(spatial))


def unified_position(coords: torch.Tensor, ref: int) -> torch.Tensor:
    """Distances of ``(B, N, 2)`` coordinates to the ``ref x ref`` grid ``linspace(0, 1, ref)^2``: ``(B, N, ref^2)``
    (Transolver's ``unified_pos``)."""
    t = torch.linspace(0.0, 1.0, ref, dtype=coords.dtype, device=coords.device)
    ref_pts = torch.stack(torch.meshgrid(t, t, indexing="ij"), dim=-1).reshape(-1, 2)
    return torch.cdist(coords, ref_pts.expand(coords.shape[0], -1, -1))
