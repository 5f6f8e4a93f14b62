"""The point-token path shared by LaMO's mesh variants and Transolver: per-point features, lifting, blocks.

For a mesh or point cloud with ``N`` points (a structured mesh's ``(H, W)`` index grid flattened)::

    features = [pos, x, ctx (constant), normalised index coordinates]         # mesh_features, (B, N, c)
    h        = MLP_{c -> 2D -> D}(features) + placeholder [+ MLP(timestep_embedding(ctx[:, 0]))]
    h        = block_L( ... block_1(h))                                     # the last block projects to C_out

The models check their inputs (``neurodyn.models.inputs.check_mesh_input``) before assembling the features.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .grids import grid_channels
from .init import trunc_normal_init
from .mlp import ChannelMLP
from .slice import SliceEncoder

__all__ = ["PointOperator", "mesh_features", "timestep_embedding"]


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal embedding ``[cos(t f_k), sin(t f_k)]`` with ``f_k = max_period^(-k / (dim/2))``: (B,) -> (B, dim)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=t.dtype, device=t.device) / half)
    args = t[:, None] * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
    return emb


def mesh_features(
    x: torch.Tensor,
    pos,
    ctx,
    *,
    structured: bool,
    pos_channels: int,
    positional_grid: bool,
    ctx_as_channels: bool = True,
):
    """The per-point features ``(B, N, c)`` of a (checked) mesh / point-cloud input, and its index grid.

    Returns ``(features, grid)`` where ``grid`` is the (H, W) index grid of a structured mesh (None for
    point clouds). Feature order: ``[pos, x, ctx (constant), normalised index coordinates]``; ``pos`` is
    used only when ``pos_channels > 0`` (otherwise ignored: datasets pass it also when it is ``x`` itself).
    """
    if structured:
        b, hh, ww, c = x.shape
        grid = (hh, ww)
        parts = [x.reshape(b, hh * ww, c)]
    else:
        b = x.shape[0]
        grid = None
        parts = [x]
    n = parts[0].shape[1]
    if pos_channels > 0:
        parts.insert(0, pos.reshape(b, -1, pos.shape[-1]).to(x.dtype))
    if ctx is not None and ctx_as_channels:
        parts.append(ctx.to(x.dtype)[:, None, :].expand(b, n, ctx.shape[-1]))
    if structured and positional_grid:
        parts.append(grid_channels(grid, b, x.dtype, x.device).reshape(b, n, 2))
    return torch.cat(parts, dim=-1), grid


class PointOperator(nn.Module):
    """Base of the point-token models (config fields ``width``, ``act``, ``placeholder``, ``time_embedding``,
    ``out_channels``; ``self.blocks``, the last one projecting to C_out)::

        h = MLP_{c -> 2D -> D}(features) + placeholder [+ MLP(timestep_embedding(ctx[:, 0]))]   # (B, N, D)
        h = block_L( ... block_1(h))                                                      # (B, N, C_out)
        y = h reshaped to x's shape with C_out channels
    """

    def _init_lifting(self, c_in: int) -> None:
        cfg, D = self.config, self.config.width
        self.lift = ChannelMLP(c_in, D, 2 * D, cfg.act)
        self.placeholder = nn.Parameter(torch.rand(D) / D) if cfg.placeholder else None
        self.time_fc = nn.Sequential(nn.Linear(D, D), nn.SiLU(), nn.Linear(D, D)) if cfg.time_embedding else None

    def _init_weights(self) -> None:
        """Code initialisation: trunc_normal Linear weights, the slice projections orthogonal (as built)."""
        trunc_normal_init(self, skip=[m.in_project_slice for m in self.modules() if isinstance(m, SliceEncoder)])

    def _forward_points(
        self, feats: torch.Tensor, grid, ctx, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``mask (B, N)``: True on the real points of point clouds padded to a common N; the slice tokens pool
        those only, so each real point's output is the one of its cloud without the padding."""
        extra = {}
        if mask is not None:
            if grid is not None or tuple(mask.shape) != tuple(feats.shape[:2]):
                raise ValueError(
                    f"a point mask is for point clouds and has shape (B, N) = {tuple(feats.shape[:2])}; "
                    f"got {tuple(mask.shape)}" + (" on a structured mesh" if grid is not None else "")
                )
            extra["mask"] = mask.bool()
        h = self.lift(feats)
        if self.placeholder is not None:
            h = h + self.placeholder
        if self.time_fc is not None:
            h = h + self.time_fc(timestep_embedding(ctx[:, 0].to(h.dtype), self.config.width))[:, None, :]
        for blk in self.blocks:
            h = blk(h, grid=grid, **extra)
        return h.reshape(*x.shape[:-1], self.config.out_channels)
