"""Transolver (Wu, Luo, Wang, Wang, Long; ICML 2024), registered as ``"transolver"``: LaMO's baseline.

Physics attention over slices (``neurodyn.nn.slice.PhysicsAttention``) in pre-norm residual blocks, with
the Neural-Solver-Library / Transolver standard-benchmark configuration (see the ``transolver/*`` presets)::

    h    = MLP_{c -> 2D -> D}(features) + placeholder                      # lifting (+ time embedding)
    for l = 1..L:
        u      = LN_1(h)
        Z, W   = slice(u)                     # W = softmax(Linear(Proj_x u) / tau) (B, H, N, M), Z = weighted means
        Z      = softmax(q(Z) k(Z)^T / sqrt(d_h)) v(Z)               # attention among the M slice tokens, per head
        h      = h + Linear(sum_m W[n, m] Z[m])                      # deslice with the same W
        h      = h + MLP(LN_2(h))
    u    = Linear(LN_3(h))

``variant``: ``"structured_mesh"`` (``x: (B, H, W, C_in)``; ``Proj`` is a 3x3 conv over the index grid;
the library's ``Transolver_2D``, which it also uses on the regular Darcy and Navier-Stokes grids) or
``"point_cloud"`` (``x: (B, N, C_in)``, optional ``pos: (B, N, d)``; ``Proj`` linear; ``Transolver_1D``).

Features: ``[pos, x, ctx, coordinates]``; with ``unified_pos = r > 0`` the coordinates (the normalised
index grid of a structured mesh, or ``pos`` / ``x`` of a point cloud) are replaced by their distances to
an ``r x r`` reference grid on [0, 1]^2 (``r^2`` features; the library's ``unified_pos`` with ``ref=8``,
used for Darcy and Navier-Stokes). The slice temperature is clamped to [0.1, 5] on structured meshes.
Initialisation as in the library: truncated-normal(0.02) Linear weights, zero biases, orthogonal slice
projection. The learned ``placeholder`` is added after the lifting always (the library adds it only when
there is no input function; its parameter exists either way, so counts agree).

Parameter counts: 2,826,945 for the Darcy configuration (width 128, 8 layers, 8 heads, 64 slices,
unified_pos 8) and 11,232,321 for Navier-Stokes (width 256, 32 slices), the ends of the 2.8-11.2 M range
the LaMO paper gives for Transolver (its Table 9); checked in ``tests/models/test_transolver.py``.

Readings: Transolver's Darcy script for the sizes (the presets set the others); the table is in
docs/papers/notes-lamo.md#transolver-baseline-paper-vs-code.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import ConfigError, check_choice, check_min
from ..nn.blocks import ResidualBlock
from ..nn.grids import grid_channels, unified_position
from ..nn.mlp import ACTIVATIONS
from ..nn.point_operator import PointOperator, mesh_features
from ..nn.slice import PhysicsAttention, slice_clamp
from .inputs import check_mesh_input
from .registry import register

__all__ = ["TransolverConfig", "Transolver"]


@dataclass
class TransolverConfig:
    """Configuration of ``Transolver`` (one line per field: type, default, meaning; the module docstring's table
    says where each default comes from).

    Attributes:
        in_channels (int, 1): input channels (filled in from the data).
        out_channels (int, 1): output channels (filled in from the data).
        variant (str, "structured_mesh"): structured_mesh (also regular grids) | point_cloud.
        width (int, 128): channels D.
        n_layers (int, 8): blocks L.
        n_heads (int, 8): slice heads H; must divide width.
        n_slices (int, 64): slice tokens M.
        mlp_ratio (float, 1.0): hidden width of each block's MLP, as a multiple of D.
        act (str, "gelu"): the MLPs' activation.
        dropout (float, 0.0): dropout in the physics attention (the library's option; its scripts use 0).
        positional_grid (bool, True): append the normalised index coordinates (structured meshes).
        unified_pos (int, 0): reference-grid size r (0: off); replaces the coordinates by r^2 distances.
        pos_channels (int, 0): coordinate channels of ``pos`` used as features (0: ``pos`` is ignored).
        placeholder (bool, True): a learned vector added after the lifting (the library's; same count either way).
        slice_temperature (float, 0.5): initial softmax temperature of the slice weights (the library's).
        slice_clamp (tuple | None, None): temperature clamp (None: [0.1, 5] on structured meshes as the library,
            none on point clouds; (): off).
        ctx_channels (int, 0): length of ``ctx`` (appended as constant channels; with time_embedding the time).
        time_embedding (bool, False): ``ctx[:, 0]`` as a time, embedded and added after the lifting (as LaMO).
    """

    in_channels: int = 1
    out_channels: int = 1
    variant: str = "structured_mesh"
    width: int = 128
    n_layers: int = 8
    n_heads: int = 8
    n_slices: int = 64
    mlp_ratio: float = 1.0
    act: str = "gelu"
    dropout: float = 0.0
    positional_grid: bool = True
    unified_pos: int = 0
    pos_channels: int = 0
    placeholder: bool = True
    slice_temperature: float = 0.5
    slice_clamp: tuple | None = None
    ctx_channels: int = 0
    time_embedding: bool = False

    def __post_init__(self) -> None:
        check_choice(
            "transolver variant ('structured_mesh' also for regular grids)",
            self.variant,
            ("structured_mesh", "point_cloud"),
        )
        check_min("transolver", self, ("in_channels", "out_channels", "width", "n_layers", "n_heads", "n_slices"), 1)
        check_min("transolver", self, ("unified_pos", "pos_channels", "ctx_channels"), 0)
        if self.width % self.n_heads:
            raise ConfigError(f"transolver width ({self.width}) must be divisible by n_heads ({self.n_heads}).")
        check_choice("transolver act", str(self.act).lower(), ACTIVATIONS)
        if self.time_embedding and self.ctx_channels < 1:
            raise ConfigError("transolver time_embedding reads the time from ctx[:, 0]; set ctx_channels >= 1.")
        if self.unified_pos and self.variant == "point_cloud" and self.pos_channels not in (0, 2):
            raise ConfigError(f"transolver unified_pos needs 2-d coordinates; pos_channels is {self.pos_channels}.")
        if self.unified_pos and self.variant == "point_cloud" and self.pos_channels == 0 and self.in_channels != 2:
            raise ConfigError(
                "transolver unified_pos on a point cloud without pos treats x as the coordinates, so "
                f"in_channels must be 2; got {self.in_channels}."
            )


@register("transolver", TransolverConfig)
class Transolver(PointOperator):
    """Transolver, ``model(x, pos=None, ctx=None) -> y``; shapes as ``LaMO``'s mesh variants."""

    def __init__(self, config: TransolverConfig):
        super().__init__()
        self.config = cfg = config
        D = cfg.width
        structured = cfg.variant == "structured_mesh"
        clamp = slice_clamp(cfg.slice_clamp, structured)
        if cfg.unified_pos:
            r2 = cfg.unified_pos**2
            if structured:
                coord_in = r2
            else:  # the coordinates (pos, or x itself) are replaced by the distances
                coord_in = r2 - (cfg.pos_channels or cfg.in_channels)
            c_in = cfg.in_channels + cfg.pos_channels + coord_in
        else:
            c_in = cfg.in_channels + cfg.pos_channels + (2 if structured and cfg.positional_grid else 0)
        c_in += 0 if cfg.time_embedding else cfg.ctx_channels
        self._init_lifting(c_in)
        self.blocks = nn.ModuleList(
            ResidualBlock(
                D,
                PhysicsAttention(
                    D,
                    cfg.n_heads,
                    cfg.n_slices,
                    "conv2d" if structured else "linear",
                    dropout=cfg.dropout,
                    temperature=cfg.slice_temperature,
                    clamp=clamp,
                ),
                cfg.mlp_ratio,
                cfg.act,
                out_channels=cfg.out_channels if l == cfg.n_layers - 1 else 0,
            )
            for l in range(cfg.n_layers)
        )
        self._init_weights()

    def forward(
        self,
        x: torch.Tensor,
        pos: torch.Tensor | None = None,
        ctx: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        cfg = self.config
        structured = cfg.variant == "structured_mesh"
        check_mesh_input(
            "Transolver",
            x,
            pos,
            ctx,
            model=self,
            structured=structured,
            in_channels=cfg.in_channels,
            pos_channels=cfg.pos_channels,
            ctx_channels=cfg.ctx_channels,
        )
        feats, grid = mesh_features(
            x,
            pos,
            ctx,
            structured=structured,
            pos_channels=cfg.pos_channels,
            positional_grid=cfg.positional_grid and not cfg.unified_pos,
            ctx_as_channels=not cfg.time_embedding,
        )
        if cfg.unified_pos:
            b, n, _ = feats.shape
            if structured:
                coords = grid_channels(grid, b, feats.dtype, feats.device).reshape(b, n, 2)
                feats = torch.cat([unified_position(coords, cfg.unified_pos), feats], dim=-1)
            else:
                k = cfg.pos_channels or cfg.in_channels  # pos comes first in the features; else x is the coordinates
                feats = torch.cat([unified_position(feats[..., :k], cfg.unified_pos), feats[..., k:]], dim=-1)
        return self._forward_points(feats, grid, ctx, x, mask)
