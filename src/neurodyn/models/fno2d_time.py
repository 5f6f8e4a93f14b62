"""The 2D multi-input FNO of ST-SSM's Table 2 and its reduced form FNO2D-R of Table 5, registered as
``"fno2d_time"`` and ``"fno2d_r"``.

Li et al.'s ``fourier_2d_time.py`` as the paper uses it (App. E.4: "the output of the integral kernel is
passed through a nonlinearity before the residual skip"), for ``x: (B, X, Y, C_in)`` with ``C_in`` = the last
K = 4 frames as channels (``data.frames_as_channels: true``)::

    v_0     = P([x, ctx, grid])                         P = Linear(C_in + n_ctx + 2 -> H)
    v_{l+1} = sigma( MLP_l(K_l v_l) + W_l v_l )         sigma = GELU, not after the last layer
    y       = Q(v_L)                                    Q = Linear(H -> 4H) -> GELU -> Linear(4H -> C_out)

``MLP_l`` = ``Linear(H, H) -> GELU -> Linear(H, H)``, ``W_l`` = ``Linear(H, H)`` (1x1 convolutions), ``K_l`` the
Fourier integral operator keeping ``m_1`` non-negative and ``m_1`` negative frequencies along x and ``m_2``
along y (``modes`` entries 0 = all: ``grid_size // 2``):

* ``"fno2d_time"``: ``K_l`` mixes channels, ``(K v)^(k) = R(k) v^(k)`` with ``R(k)`` a complex ``H x H``
  matrix (``neurodyn.nn.spectral.SpectralConv``, no bias);
* ``"fno2d_r"`` (``reduced=True``): the channel mixing is removed (the paper's snippet:
  ``weights (in, m1, m2)``, ``input * weights``), ``(K v)_c^(k) = r_c(k) v_c^(k)``, one complex number
  per channel and mode; initialised as the snippet, ``scale * U[0, 1)`` with ``scale = 1 / H^2``.

Parameter counts at the paper's settings (64x64, all 32 x 32 modes, H = 64, 4 frames + 2 coordinates):
FNO2D-R **1,115,841** (Table 5) and Multi Input FNO2D **67,176,129** (Table 2), i.e.
``4 (2 H m1 m2 * 2 [* H] + 2 (H^2 + H) + H^2 + H) + (6 + 1) H + (H 4H + 4H + 4H + 1)``. The grid is
``i / n`` (the paper's shared positional encoding), and no domain padding (periodic data).

Readings: ``projection_channels = 4H`` (only it gives the printed counts), all modes, GELU after
``MLP_l + W_l``; the table is in docs/papers/notes-stssm.md#fno2d-time-baselines-paper-vs-code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError, check_min
from ..nn.grids import append_context, periodic_grid
from ..nn.mlp import ChannelMLP, PointwiseConv
from ..nn.spectral import SpectralConv, clamp_modes, resolve_modes
from .inputs import check_grid_input
from .registry import register

__all__ = ["FNO2DTimeConfig", "FNO2DTime", "FNO2DRConfig", "FNO2DR", "ReducedSpectralConv2d"]


class ReducedSpectralConv2d(nn.Module):
    """Channel-wise (no mixing) Fourier multiplier on ``(B, C, X, Y)``: ``y_c = irfft2(r_c . rfft2(x_c))``,
    ``r_c(k)`` learned for ``|k_x| < m1`` (both signs) and ``0 <= k_y < m2``, zero elsewhere."""

    def __init__(self, channels: int, modes: tuple[int, int]):
        super().__init__()
        self.channels, self.modes = channels, (int(modes[0]), int(modes[1]))
        m1, m2 = self.modes
        scale = 1.0 / (channels * channels)
        self.weight = nn.Parameter(scale * torch.rand(2, channels, m1, m2, 2))  # (corner, C, m1, m2, re/im)

    def extra_repr(self) -> str:
        return f"{self.channels}, modes={self.modes}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, X, Y = x.shape
        m, (m1, m2) = self.modes[0], clamp_modes("ReducedSpectralConv2d", self.modes, (X, Y))  # what the grid holds
        xf = torch.fft.rfft2(x)
        w = torch.view_as_complex(self.weight)[:, :, :, :m2]
        w = torch.stack([w[0, :, :m1], w[1, :, m - m1 :]])  # frequencies 0..m1-1 and -m1..-1
        out = torch.zeros_like(xf)
        out[:, :, :m1, :m2] = xf[:, :, :m1, :m2] * w[0]
        out[:, :, X - m1 :, :m2] = xf[:, :, X - m1 :, :m2] * w[1]
        return torch.fft.irfft2(out, s=(X, Y))


@dataclass
class FNO2DTimeConfig:
    """Configuration of ``FNO2DTime`` / ``FNO2DR`` (one line per field: type, default, meaning; see the module
    docstring).

    Attributes:
        in_channels (int, 4): frames x field channels (from the data).
        out_channels (int, 1): output channels (from the data).
        ctx_channels (int, 0): length of the per-sample context vector (0: none).
        modes (tuple, (0, 0)): (m1, m2); 0: all (``grid_size // 2``).
        grid_size (tuple, ()): (X, Y), needed for modes 0 (set from the data); modes it cannot hold are cut to
            (X // 2, Y // 2 + 1), with one warning.
        width (int, 64): channels H.
        n_layers (int, 4): Fourier layers.
        projection_channels (int, 256): hidden width of Q (4H).
        reduced (bool, False): channel-wise spectral weights (FNO2D-R; ``fno2d_r`` sets it).
        positional_grid (bool, True): append the coordinates ``i / n``.
    """

    in_channels: int = 4
    out_channels: int = 1
    ctx_channels: int = 0
    modes: tuple[int, ...] = (0, 0)
    grid_size: tuple[int, ...] = ()
    width: int = 64
    n_layers: int = 4
    projection_channels: int = 256
    reduced: bool = False
    positional_grid: bool = True

    MODEL: ClassVar[str] = "FNO2DTime"  # the name its messages give

    def __post_init__(self) -> None:
        check_min(self.MODEL, self, ("in_channels", "out_channels", "width", "n_layers", "projection_channels"), 1)


@register("fno2d_time", FNO2DTimeConfig)
class FNO2DTime(nn.Module):
    """Multi-input 2D FNO (``fourier_2d_time.py``), ``(B, X, Y, in_channels) -> (B, X, Y, out_channels)``."""

    def __init__(self, config: FNO2DTimeConfig):
        super().__init__()
        name = type(self).__name__
        modes = resolve_modes(name, config.modes, config.grid_size)
        if len(modes) != 2:
            raise ConfigError(f"{name} is a 2-D model: modes needs 2 entries; got {tuple(config.modes)}.")
        modes = clamp_modes(name, modes, config.grid_size)
        self.config, self.modes = config, modes
        H = config.width
        self.lifting = nn.Linear(config.in_channels + config.ctx_channels + (2 if config.positional_grid else 0), H)
        if config.reduced:
            self.spectral = nn.ModuleList(ReducedSpectralConv2d(H, modes) for _ in range(config.n_layers))
        else:
            self.spectral = nn.ModuleList(SpectralConv(H, H, modes, bias=False) for _ in range(config.n_layers))
        self.mlps = nn.ModuleList(
            nn.Sequential(PointwiseConv(H, H), nn.GELU(), PointwiseConv(H, H)) for _ in range(config.n_layers)
        )
        self.skips = nn.ModuleList(PointwiseConv(H, H) for _ in range(config.n_layers))
        self.projection = ChannelMLP(H, config.out_channels, config.projection_channels, "gelu")

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor | None = None, ctx: torch.Tensor | None = None
    ) -> torch.Tensor:
        cfg = self.config
        check_grid_input(type(self).__name__, x, 2, cfg.in_channels, ctx, cfg.ctx_channels, pos, self)
        x = append_context(x, ctx)
        if cfg.positional_grid:
            x = torch.cat([x, periodic_grid(tuple(x.shape[1:3]), x.shape[0], x.dtype, x.device)], dim=-1)
        v = self.lifting(x).movedim(-1, 1).contiguous()  # (B, H, X, Y)
        last = cfg.n_layers - 1
        for l in range(cfg.n_layers):
            v = self.skips[l](v, add=self.mlps[l](self.spectral[l](v)))
            if l < last:
                v = F.gelu(v)
        return self.projection(v.movedim(1, -1))


@dataclass
class FNO2DRConfig(FNO2DTimeConfig):
    """``FNO2DTimeConfig`` (every field above) with ``reduced`` (bool, True): FNO2D-R's channel-wise spectral
    weights (Table 5)."""

    reduced: bool = True

    MODEL: ClassVar[str] = "FNO2DR"


@register("fno2d_r", FNO2DRConfig)
class FNO2DR(FNO2DTime):
    """FNO2D-R: the multi-input 2D FNO without channel mixing in the spectral weights (Table 5)."""
