"""Fourier Neural Operator (Li et al., ICLR 2021) on 1D and 2D regular grids, registered as ``"fno"``.

Architecture, for input ``a: (B, *spatial, C_in)`` (channels last) and output ``u: (B, *spatial, C_out)``::

    v_0     = P( [a, ctx, grid] )                                 lifting, pointwise
    v_{l+1} = σ( W_l v_l + K_l v_l ),   l = 0 .. L-2              Fourier layers
    v_L     =    W_{L-1} v_{L-1} + K_{L-1} v_{L-1}                last layer: no activation
    u       = Q( v_L )                                            projection, pointwise

* ``[a, ctx, grid]`` concatenates along channels the input, the ``ctx_channels`` per-sample context values
  (broadcast over the grid) and, with ``positional_grid``, the ``d`` normalised coordinates
  ``linspace(0, 1, n_j)`` of each axis (endpoints included, as in Li et al.'s scripts);
* ``P`` is a ``ChannelMLP`` with one hidden layer of ``lifting_channels`` (``0``: a single ``Linear``) and
  ``Q`` one with ``projection_channels``; both act per grid point;
* ``K_l`` is ``SpectralConv(width, width, modes)`` (see ``neurodyn.nn.spectral`` for what ``modes`` keeps)
  with a bias, ``W_l`` a pointwise linear map without bias (``skip="linear"``; Li et al. put the bias in
  ``W_l`` instead, neuraloperator in ``K_l`` as here: the same function and count), the identity
  (``"identity"``) or absent (``"none"``); ``σ`` is ``activation``.
* ``padding > 0`` (non-periodic problems such as Darcy flow) zero-pads every axis at its end by
  ``round(padding * n)`` points after the lifting and crops them off before the projection, so that the
  Fourier layers do not treat the domain as periodic.

Inside, the Fourier layers run channels-first ``(B, width, *spatial)``. ``len(modes)`` (1 or 2) sets the
number of spatial axes. Parameter count with ``skip="linear"``, ``d`` axes, ``c_in = in + ctx + d*grid``::

    L * (2 * width^2 * prod(kept) + width^2 + width) + MLP(c_in -> lifting -> width) + MLP(width -> projection -> out)

with ``prod(kept) = 2*m_1 * m_2`` in 2D and ``m_1`` in 1D, ``MLP(a -> h -> b) = a*h + h + h*b + b``
(``a*b + b`` when ``h = 0``). Li et al.'s ``fourier_2d.py`` (modes 12, width 32, grid on, lifting 0,
projection 128) has 2,368,001 parameters, and so has ``build("fno", modes=(12, 12), lifting_channels=0)``.

Readings (Li et al.'s scripts, the baseline of LaMO, GeoMaNO and CHONN): a lifting MLP of 128 (neuraloperator's;
the code's one Linear is ``lifting_channels=0``); the table is in
docs/papers/notes-chonn.md#fno-backbone-paper-vs-code.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError, check_choice, check_min
from ..nn.grids import append_context, grid_channels
from ..nn.mlp import ACTIVATIONS, ChannelMLP, PointwiseConv, activation
from ..nn.spectral import SpectralConv, clamp_modes
from .inputs import check_grid_input
from .registry import register

__all__ = ["FNOConfig", "FNO"]


@dataclass
class FNOConfig:
    """Configuration of ``FNO`` (one line per field: type, default, meaning; the module docstring has the
    architecture and where each default comes from).

    Attributes:
        in_channels (int, 1): channels of the input field (filled in from the data).
        out_channels (int, 1): channels of the output field (filled in from the data).
        modes (tuple, (12, 12)): Fourier modes kept per spatial axis; its length (1 or 2) is the number of axes.
        width (int, 32): channels of the Fourier layers.
        n_layers (int, 4): Fourier layers.
        lifting_channels (int, 128): hidden width of the lifting MLP (0: one linear map, Li et al.'s fc0).
        projection_channels (int, 128): hidden width of the projection MLP (0: one linear map).
        padding (float, 0.0): zero padding at the end of every axis, as a fraction of its size (Li et al.: ~0.1 on
            Darcy; kept for non-periodic data, no preset pads).
        positional_grid (bool, True): append the coordinates linspace(0, 1) per axis as input channels.
        activation (str, "gelu"): gelu | relu | tanh | silu | elu | identity.
        skip (str, "linear"): the layer's pointwise path W: linear | identity | none.
        ctx_channels (int, 0): length of the per-sample context vector ``ctx`` (0: none).
        spectral_method (str, "auto"): how SpectralConv transforms: auto | dft | fft (the same result).
        grid_size (tuple, ()): the training grid (set from the data); modes it cannot hold are cut to what it holds
            (``n // 2`` on the first axis of 2D, ``n // 2 + 1`` on the last, after padding), with one warning.
    """

    in_channels: int = 1
    out_channels: int = 1
    modes: tuple[int, ...] = (12, 12)
    width: int = 32
    n_layers: int = 4
    lifting_channels: int = 128
    projection_channels: int = 128
    padding: float = 0.0
    positional_grid: bool = True
    activation: str = "gelu"
    skip: str = "linear"
    ctx_channels: int = 0
    spectral_method: str = "auto"
    grid_size: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.modes, int):
            raise ConfigError(
                f"FNO modes must be a tuple with one entry per spatial axis, e.g. (16,) or (12, 12); "
                f"got {self.modes!r}."
            )
        if len(self.modes) not in (1, 2):
            raise ConfigError(
                f"FNO supports 1 or 2 spatial axes, i.e. len(modes) in (1, 2); got modes={tuple(self.modes)}."
            )
        if any(int(m) < 1 for m in self.modes):
            raise ConfigError(f"FNO modes must be positive; got modes={tuple(self.modes)}.")
        check_min("FNO", self, ("in_channels", "out_channels", "width", "n_layers"), 1)
        check_min("FNO", self, ("lifting_channels", "projection_channels", "ctx_channels"), 0)
        if not 0.0 <= float(self.padding) <= 1.0:
            raise ConfigError(f"FNO padding is a fraction of the grid size in [0, 1]; got {self.padding!r}.")
        check_choice("FNO skip", self.skip, ("linear", "identity", "none"))
        check_choice("FNO activation", str(self.activation).lower(), ACTIVATIONS)
        check_choice("FNO spectral_method", self.spectral_method, ("auto", "dft", "fft"))


@register("fno", FNOConfig)
class FNO(nn.Module):
    """Fourier Neural Operator, ``model(x, pos=None, ctx=None) -> y``.

    Shapes: ``x (B, n_1[, n_2], in_channels)`` -> ``y (B, n_1[, n_2], out_channels)``; ``ctx (B, ctx_channels)``
    when the config has ``ctx_channels > 0``. Works at any resolution large enough for the modes
    (``2*modes[0] <= n_1`` and ``modes[-1] <= n_2 // 2 + 1`` after padding in 2D; ``modes[0] <= n_1 // 2 + 1``
    in 1D); on a smaller grid its layers keep the modes the grid holds (``nn.spectral.grid_modes``), and built for
    a ``grid_size`` smaller than that, it has only those modes (``self.modes``).
    See the module docstring for the equations and the parameter count.
    """

    def __init__(self, config: FNOConfig):
        super().__init__()
        self.config = config
        self.n_spatial = d = len(config.modes)
        grid = [int(n) + int(round(config.padding * int(n))) for n in config.grid_size]  # the grid the layers see
        self.modes = modes = clamp_modes(type(self).__name__, config.modes, grid)
        lift_in = config.in_channels + config.ctx_channels + (d if config.positional_grid else 0)
        self.lifting = ChannelMLP(lift_in, config.width, config.lifting_channels, config.activation)
        self.spectral = nn.ModuleList(
            SpectralConv(config.width, config.width, modes, method=config.spectral_method, bias=True)
            for _ in range(config.n_layers)
        )
        if config.skip == "linear":  # the layer's bias lives in the SpectralConv (free there)
            self.skips = nn.ModuleList(
                PointwiseConv(config.width, config.width, bias=False) for _ in range(config.n_layers)
            )
        else:
            self.skips = None
        self.act = activation(config.activation)
        self.projection = ChannelMLP(config.width, config.out_channels, config.projection_channels, config.activation)

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor | None = None, ctx: torch.Tensor | None = None
    ) -> torch.Tensor:
        cfg = self.config
        d = self.n_spatial
        check_grid_input("FNO", x, d, cfg.in_channels, ctx, cfg.ctx_channels, pos, self)
        b, *spatial, _ = x.shape
        pads = [int(round(cfg.padding * n)) for n in spatial]  # a grid smaller than the modes: SpectralConv cuts them
        x = append_context(x, ctx)
        if cfg.positional_grid:
            x = torch.cat([x, grid_channels(tuple(spatial), b, x.dtype, x.device)], dim=-1)
        h = self.lifting(x).movedim(-1, 1).contiguous()  # (B, width, *spatial)

        if any(pads):
            pad_arg: list[int] = []
            for p in reversed(pads):  # F.pad lists the last axis first
                pad_arg += [0, p]
            h = F.pad(h, pad_arg)

        last = len(self.spectral) - 1
        for l, conv in enumerate(self.spectral):
            y = conv(h)
            if self.skips is not None:
                y = self.skips[l](h, add=y)  # W h + K h in one GEMM
            elif cfg.skip == "identity":
                y = y + h
            h = self.act(y) if l < last else y

        if any(pads):
            h = h[(slice(None), slice(None)) + tuple(slice(0, n) for n in spatial)]
        return self.projection(h.movedim(1, -1))
