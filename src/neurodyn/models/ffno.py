"""Factorized FNO (Tran et al., ICLR 2023) and S4-FFNO (Buitrago et al., ICLR 2025), the 1D/2D baselines of
ST-SSM's Tables 1-2, registered as ``"ffno"`` and ``"s4_ffno"``.

FFNO, for ``x: (B, *spatial, C_in)`` (channels last, ``d = len(modes)`` axes)::

    v_0     = P( [x, ctx, grid] )                                   pointwise lifting
    b_l     = FF_l( sum_{a=1..d} IFFT_a[ R_{l,a} . FFT_a(v_l) ] )     factorised Fourier layer
    v_{l+1} = v_l + b_l,                                            l = 0 .. L-1
    y       = Q( b_{L-1} )                                          (fourierflow projects the last update)

* ``R_{l,a}`` mixes channels (``H x H`` complex) for each of the lowest ``m_a`` non-negative frequencies
  along axis ``a`` (``neurodyn.nn.spectral.SpectralConv`` with one axis, run along every axis in turn);
  ``m_a = 0`` in the config means "all": ``k_max = floor(n_a / 2)`` for ``grid_size[a] = n_a`` (the
  paper: "FNO/FFNO keep all modes");
* ``FF`` = ``Linear(H -> f H) -> act -> Linear(f H -> H)`` (``ff_layers`` linear maps; optional final
  LayerNorm), ``P`` one ``Linear`` and ``Q`` = ``Linear(H -> 128) -> Linear(128 -> C_out)`` with no
  activation between (fourierflow's ``out``), all with weight normalisation (``weight_norm``);
* ``[x, ctx, grid]``: fields, the per-sample context as constant channels and ``d`` coordinates
  ``i / n_a`` in [0, 1) (ST-SSM App. E.4's shared positional encoding).

**Parameter counts: the paper's tables are reproduced by fourierflow's FFNO defaults** (width 64, 4
layers, ``factor = 4``, ``ff_weight_norm = True``, ``n_ff_layers = 2``, ``layer_norm = False``; output
hidden 128), not by the "hidden size 128" of the paper's App. E.4 for the feed-forward::

    L * d * 2 H^2 m  +  L * [(H*fH + 2 fH) + (fH*H + 2 H)]  +  (c_in H + 2 H)  +  (128 H + 256) + (128 C_out + 2 C_out)

with ``c_in = C_in + ctx + d``. 1D res 128 (``m = 64``): 2,239,618; res 64: 1,191,042; res 32: 666,754;
Multi-Input FFNO (``C_in = 4`` frames as channels) adds 192: 2,239,810 / 1,191,234 / 666,946; 2D 64x64
(``m = 32`` per axis): 2,239,682 -- all as printed in Tables 1 and 2 (tests/models/test_ffno.py). A
Multi-Input FFNO is this model fed ``t_in = 4`` frames as channels (``data.frames_as_channels: true``).

**S4-FFNO** (MemNO) inserts one temporal S4D block (``neurodyn.nn.s4d.S4D``, 20,736 parameters at
``H = N = 64``) after ``memory_after`` = 2 layers: the model takes the time layout
``x: (B, T, *spatial, C_in)`` (``data.frames_as_channels: false``), runs lifting and the first layers on
each of the last ``max(K, 1)`` frames, the causal S4D along time with its kernel truncated to the window
``K = memory_window`` (4), ``v <- v + M(v)``, and the remaining layers and projection on the last frame;
it returns ``(B, 1, *spatial, C_out)``, the next frame. Tables 1-2: FFNO + 20,736 exactly.

Readings: fourierflow's defaults (``ff_factor=4``, two feed-forward layers, weight norm) where ST-SSM's App. E.4
says otherwise, since only they give the printed counts; the table is in
docs/papers/notes-stssm.md#ffno-and-s4-ffno-baselines-paper-vs-code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from ..errors import ConfigError, check_choice, check_min
from ..nn.grids import append_context, periodic_grid
from ..nn.mlp import ACTIVATIONS, FeedForward, activation, wn_linear
from ..nn.s4d import S4D, S4D_INITS
from ..nn.spectral import SpectralConv, clamp_modes, resolve_modes
from .inputs import check_grid_extras, check_grid_input, check_input, grid_shape
from .registry import register

__all__ = ["FFNOConfig", "FFNO", "S4FFNOConfig", "S4FFNO"]


@dataclass
class FFNOConfig:
    """Configuration of ``FFNO`` (one line per field: type, default, meaning; see the module docstring). The
    feed-forward and projection options are fourierflow's, kept as its readings (the module's table).

    Attributes:
        in_channels (int, 1): field channels in (filled in from the data).
        out_channels (int, 1): field channels out (filled in from the data).
        ctx_channels (int, 0): length of the per-sample context vector (0: none).
        modes (tuple, (0,)): Fourier modes kept per axis (its length = number of spatial axes); 0: all
            (``grid_size // 2``, the ST-SSM paper's setting).
        grid_size (tuple, ()): spatial size per axis, needed only for ``modes`` entries 0 (set from the data); modes
            it cannot hold are cut to ``n // 2 + 1``, with one warning.
        width (int, 64): channels H.
        n_layers (int, 4): Fourier layers.
        ff_factor (int, 4): hidden width of the feed-forward FF, as a multiple of H (fourierflow).
        ff_layers (int, 2): linear maps in FF (fourierflow).
        weight_norm (bool, True): weight-normalise every linear map (fourierflow; needed for Tables 1-2's counts).
        layer_norm (bool, False): a LayerNorm at the end of FF (fourierflow's option).
        activation (str, "gelu"): inside FF (the paper: GELU; fourierflow's code: ReLU).
        projection_channels (int, 128): hidden width of Q.
        projection_activation (str, "identity"): between Q's two maps (identity: fourierflow's).
        positional_grid (bool, True): append the coordinates ``i / n``.
        project_update (bool, True): project the last layer's update ``b_{L-1}`` (fourierflow) instead of the
            state ``v_L``.
        spectral_method (str, "auto"): how SpectralConv transforms: auto | dft | fft.
    """

    in_channels: int = 1
    out_channels: int = 1
    ctx_channels: int = 0
    modes: tuple[int, ...] = (0,)
    grid_size: tuple[int, ...] = ()
    width: int = 64
    n_layers: int = 4
    ff_factor: int = 4
    ff_layers: int = 2
    weight_norm: bool = True
    layer_norm: bool = False
    activation: str = "gelu"
    projection_channels: int = 128
    projection_activation: str = "identity"
    positional_grid: bool = True
    project_update: bool = True
    spectral_method: str = "auto"

    MODEL: ClassVar[str] = "FFNO"  # the name its messages give

    def __post_init__(self) -> None:
        name = self.MODEL
        check_min(name, self, ("in_channels", "out_channels", "width", "n_layers", "projection_channels"), 1)
        if int(self.ctx_channels) < 0:
            raise ConfigError(f"{name} ctx_channels must be >= 0; got {self.ctx_channels!r}.")
        for key in ("activation", "projection_activation"):
            check_choice(f"{name} {key}", str(getattr(self, key)).lower(), ACTIVATIONS)


def _modes(cfg: FFNOConfig, name: str) -> tuple[int, ...]:
    """The modes of ``cfg`` on its ``grid_size`` (set from the data): every axis has its own 1-D transform, a half
    spectrum, so ``n // 2 + 1`` modes fit."""
    return clamp_modes(
        name, resolve_modes(name, cfg.modes, cfg.grid_size), cfg.grid_size, half_axes=(True,) * len(tuple(cfg.modes))
    )


@register("ffno", FFNOConfig)
class FFNO(nn.Module):
    """Factorized FNO, ``model(x, pos=None, ctx=None) -> y`` with ``x (B, *spatial, in_channels)`` and
    ``y (B, *spatial, out_channels)`` (1 or 2 spatial axes; see the module docstring)."""

    def __init__(self, config: FFNOConfig):
        super().__init__()
        self.modes = _modes(config, type(self).__name__)
        self.config = config
        self.n_spatial = d = len(self.modes)
        H = config.width
        self.lifting = wn_linear(self._lift_in(), H, config.weight_norm)
        self.spectral = nn.ModuleList(
            nn.ModuleList(SpectralConv(H, H, (m,), method=config.spectral_method, bias=False) for m in self.modes)
            for _ in range(config.n_layers)
        )
        self.ff = nn.ModuleList(
            FeedForward(H, config.ff_factor, config.ff_layers, config.weight_norm, config.layer_norm, config.activation)
            for _ in range(config.n_layers)
        )
        self.projection = nn.Sequential(
            wn_linear(H, config.projection_channels, config.weight_norm),
            activation(config.projection_activation),
            wn_linear(config.projection_channels, config.out_channels, config.weight_norm),
        )
        self._d = d

    def _lift_in(self) -> int:
        cfg = self.config
        return cfg.in_channels + cfg.ctx_channels + (len(self.modes) if cfg.positional_grid else 0)

    def _features(self, x: torch.Tensor, ctx: torch.Tensor | None) -> torch.Tensor:
        """``[x, ctx, grid]`` along channels for channels-last ``x (B, *spatial, C)``."""
        x = append_context(x, ctx)
        if self.config.positional_grid:
            b, *spatial, _ = x.shape
            x = torch.cat([x, periodic_grid(tuple(spatial), b, x.dtype, x.device)], dim=-1)
        return x

    def kernel(self, l: int, v: torch.Tensor) -> torch.Tensor:
        """``K_l(v) = sum_a IFFT_a[R_{l,a} FFT_a(v)]`` for channels-last ``v (N, *spatial, H)``."""
        out = None
        for a, conv in enumerate(self.spectral[l]):
            u = v.movedim(1 + a, -1)  # (N, ..., H, n_a)
            shape = u.shape
            y = conv(u.reshape(-1, shape[-2], shape[-1])).reshape(shape).movedim(-1, 1 + a)
            out = y if out is None else out + y
        return out

    def layer(self, l: int, v: torch.Tensor) -> torch.Tensor:
        """The update ``b_l = FF_l(K_l(v))``."""
        return self.ff[l](self.kernel(l, v))

    def run_layers(self, v: torch.Tensor, layers: range) -> tuple[torch.Tensor, torch.Tensor | None]:
        b = None
        for l in layers:
            b = self.layer(l, v)
            v = v + b
        return v, b

    def head(self, v: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        return self.projection(b if (self.config.project_update and b is not None) else v)

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor | None = None, ctx: torch.Tensor | None = None
    ) -> torch.Tensor:
        cfg = self.config
        check_grid_input(type(self).__name__, x, self.n_spatial, cfg.in_channels, ctx, cfg.ctx_channels, pos, self)
        v = self.lifting(self._features(x, ctx))
        v, b = self.run_layers(v, range(cfg.n_layers))
        return self.head(v, b)


@dataclass
class S4FFNOConfig(FFNOConfig):
    """``FFNOConfig`` (every field above) plus the temporal S4D memory (see the module docstring).

    Attributes:
        memory_window (int, 4): K, taps of the causal temporal kernel (0: no memory, a Markovian FFNO that reads
            the time layout).
        memory_after (int, 2): Fourier layers before the memory block.
        d_state (int, 64): states of the S4D block (``neurodyn.nn.s4d.S4D``).
        init (str, "legs"): the S4D block's initialisation (``neurodyn.nn.s4d.S4D_INITS``).
        dt_min (float, 1e-3): lower end of the S4D block's initial step.
        dt_max (float, 1e-1): upper end of the S4D block's initial step.
    """

    memory_window: int = 4
    memory_after: int = 2
    d_state: int = 64
    init: str = "legs"
    dt_min: float = 1e-3
    dt_max: float = 1e-1

    MODEL: ClassVar[str] = "S4FFNO"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.memory_after <= self.n_layers:
            raise ConfigError(f"S4FFNO memory_after must be in 0..n_layers={self.n_layers}; got {self.memory_after}.")
        if self.memory_window < 0:
            raise ConfigError(f"S4FFNO memory_window must be >= 0 (0 = no memory); got {self.memory_window}.")
        check_choice("S4FFNO init", self.init, S4D_INITS)


@register("s4_ffno", S4FFNOConfig)
class S4FFNO(FFNO):
    """S4-FFNO: ``x (B, T, *spatial, in_channels)`` (the last ``max(K, 1)`` frames are used) ->
    ``y (B, 1, *spatial, out_channels)``, the prediction of frame ``T``. ``forward_sequence`` returns the
    teacher-forced predictions for every input frame, ``(B, T, *spatial, out_channels)``."""

    def __init__(self, config: S4FFNOConfig):
        super().__init__(config)
        self.memory = (
            S4D(config.width, config.d_state, config.init, config.dt_min, config.dt_max, window=config.memory_window)
            if config.memory_window > 0
            else None
        )

    def _run(self, x: torch.Tensor, ctx: torch.Tensor | None, pos, last_only: bool) -> torch.Tensor:
        cfg = self.config
        d = self.n_spatial
        check_input(
            "S4FFNO",
            x,
            self,
            f"the time layout {grid_shape(d, cfg.in_channels, frames=True)} (data.frames_as_channels: false)",
            (d + 3,),
            cfg.in_channels,
        )
        check_grid_extras("S4FFNO", x.shape[0], pos, ctx, cfg.ctx_channels)
        if last_only:
            x = x[:, -max(cfg.memory_window, 1) :]
        B, T = x.shape[:2]
        ctx_t = None if ctx is None else ctx.repeat_interleave(T, dim=0)
        v = self.lifting(self._features(x.flatten(0, 1), ctx_t))
        v, _ = self.run_layers(v, range(cfg.memory_after))
        v = v.unflatten(0, (B, T))
        if self.memory is not None:
            v = v + self.memory(v.movedim(1, -2)).movedim(-2, 1)
        if last_only:
            v = v[:, -1:]
        T = v.shape[1]
        v, b = self.run_layers(v.flatten(0, 1), range(cfg.memory_after, cfg.n_layers))
        return self.head(v, b).unflatten(0, (B, T))  # b is None (state projected) if memory_after == n_layers

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor | None = None, ctx: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self._run(x, ctx, pos, last_only=True)

    def forward_sequence(
        self, x: torch.Tensor, pos: torch.Tensor | None = None, ctx: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self._run(x, ctx, pos, last_only=False)
