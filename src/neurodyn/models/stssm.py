"""ST-SSM, the spatiotemporal state-space neural operator (Koren & Lanthaler, arXiv 2507.23428 v1), and its
variants ST-SSM-VM, ST-SSM-FF, unidirectional and without temporal memory, registered as ``"stssm"``.

``Psi = Q o L_4 o L_3 o M o L_2 o L_1 o R`` (paper §3.4), ``x: (B, T, *spatial, C_in)`` channels last::

    h_t  = R([x_t, grid, ctx])           Linear(C_in + d + n_ctx -> H), per point and frame
    h_t <- L_2 L_1 h_t                   spatial layers, each frame on its own
    h   <- h + M(h)                      causal S4D along time at every point, kernel of K = memory_window taps
    y_t  = Q(L_4 L_3 h_t)                Linear(H -> 4H) -> GELU -> Linear(4H -> C_out)

``y_t`` predicts frame ``t + 1`` from frames ``t - K + 1 .. t``. ``forward`` returns ``(B, 1, *spatial, C_out)``,
``forward_sequence`` every ``y_t`` ``(B, T, *spatial, C_out)``; a frame without a time axis gives one frame.

Spatial layer, ``sweep_a(u) = S^a_fwd(u) + flip_a(S^a_bwd(flip_a(u)))`` with ``neurodyn.nn.s4d.S4D`` blocks:
``factorization="sequential"`` (``u += sweep_x(u)``, then ``u += sweep_y(u)``), ``"parallel"`` (ST-SSM-FF:
``u += FF(sweep_x(u) + sweep_y(u))``) or ``"zigzag"`` (ST-SSM-VM: row-major then column-major flattening).

Choices that matter (each an option; the full paper-vs-code table, with the parameter counts that fix the
architecture, is in docs/papers/notes-stssm.md#st-ssm-model-paper-vs-code):

* ``projection_channels=4H`` and ``d_state=64``: the only sizes giving the printed counts (203,713 / 369,665).
* ``residual="layer"``: one identity per sweep (the caption and the listing disagree).
* ``bidirectional=False`` doubles the spatial layers (App. C.1); ``memory_window=0`` removes ``M``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import ConfigError, check_choice, check_min
from ..nn.grids import append_context, periodic_grid
from ..nn.mlp import ChannelMLP, FeedForward
from ..nn.s4d import S4D, S4D_INITS
from .inputs import check_grid_extras, check_input, grid_shape
from .registry import register

__all__ = ["STSSMConfig", "STSSM", "BiSweep"]

FACTORIZATIONS = ("sequential", "parallel", "zigzag")
RESIDUALS = ("layer", "path", "none")


@dataclass
class STSSMConfig:
    """Configuration of ``STSSM`` (one line per field: type, default, meaning; see the module docstring).

    Attributes:
        in_channels (int, 1): channels per frame in (fields + context fields; from the data).
        out_channels (int, 1): channels per frame out (from the data).
        ctx_channels (int, 0): length of the per-sample context vector (0: none).
        dims (int, 1): spatial axes, 1 or 2.
        width (int, 64): channels H.
        d_state (int, 64): S4D state size N.
        n_layers_pre (int, 2): spatial layers before the memory.
        n_layers_post (int, 2): spatial layers after the memory.
        memory_window (int, 4): K, taps of the causal temporal kernel; 0: no temporal memory.
        factorization (str, "sequential"): sequential (ST-SSM) | parallel (ST-SSM-FF) | zigzag (ST-SSM-VM).
        bidirectional (bool, True): False: forward-only sweeps with twice as many spatial layers (App. C.1).
        residual (str, "layer"): layer | path | none (see the module docstring).
        projection_channels (int, 256): hidden width of Q (4H reproduces the paper's counts).
        positional_grid (bool, True): append the coordinates ``i / n`` to the lifting input.
        init (str, "legs"): S4D initialisation (``neurodyn.nn.s4d``).
        dt_min (float, 1e-3): lower end of the S4D initial step.
        dt_max (float, 1e-1): upper end of the S4D initial step.
        ff_factor (int, 4): the "parallel" variant's feed-forward width, as a multiple of H (fourierflow's, as the
            FFNO baseline).
        ff_weight_norm (bool, True): weight norm in that feed-forward (fourierflow's).
    """

    in_channels: int = 1
    out_channels: int = 1
    ctx_channels: int = 0
    dims: int = 1
    width: int = 64
    d_state: int = 64
    n_layers_pre: int = 2
    n_layers_post: int = 2
    memory_window: int = 4
    factorization: str = "sequential"
    bidirectional: bool = True
    residual: str = "layer"
    projection_channels: int = 256
    positional_grid: bool = True
    init: str = "legs"
    dt_min: float = 1e-3
    dt_max: float = 1e-1
    ff_factor: int = 4
    ff_weight_norm: bool = True

    def __post_init__(self) -> None:
        check_choice("STSSM dims", self.dims, (1, 2))
        check_min("STSSM", self, ("in_channels", "out_channels", "width", "d_state", "projection_channels"), 1)
        check_min("STSSM", self, ("ctx_channels", "n_layers_pre", "n_layers_post", "memory_window"), 0)
        check_choice("STSSM factorization", self.factorization, FACTORIZATIONS)
        check_choice("STSSM residual", self.residual, RESIDUALS)
        check_choice("STSSM init", self.init, S4D_INITS)
        if self.factorization != "sequential" and self.dims != 2:
            raise ConfigError(
                f"STSSM factorization={self.factorization!r} (ST-SSM-FF / -VM) is a 2-D variant; "
                "with dims=1 use 'sequential'."
            )


class BiSweep(nn.Module):
    """``S_fwd(u) + flip(S_bwd(flip(u)))`` along axis ``-2`` of ``u (..., L, H)`` (forward only if not
    ``bidirectional``); ``residual`` "layer" adds ``u``, "path" adds ``u`` once per direction."""

    def __init__(
        self,
        width: int,
        d_state: int,
        init: str,
        dt_min: float,
        dt_max: float,
        bidirectional: bool = True,
        residual: str = "none",
    ):
        super().__init__()
        self.fwd = S4D(width, d_state, init, dt_min, dt_max)
        self.bwd = S4D(width, d_state, init, dt_min, dt_max) if bidirectional else None
        self.residual = residual

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        y = self.fwd(u)
        if self.bwd is not None:
            y = y + self.bwd(u.flip(-2)).flip(-2)
        if self.residual == "layer":
            y = y + u
        elif self.residual == "path":
            y = y + (2 if self.bwd is not None else 1) * u
        return y


class _SequentialLayer(nn.Module):
    """ST-SSM: a sweep per axis, x first, each with its residual."""

    def __init__(self, cfg: STSSMConfig, bidirectional: bool):
        super().__init__()
        self.sweeps = nn.ModuleList(
            BiSweep(cfg.width, cfg.d_state, cfg.init, cfg.dt_min, cfg.dt_max, bidirectional, cfg.residual)
            for _ in range(cfg.dims)
        )

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (N, *spatial, H)
        for a, sweep in enumerate(self.sweeps):
            h = sweep(h.movedim(1 + a, -2)).movedim(-2, 1 + a)
        return h


class _ParallelLayer(nn.Module):
    """ST-SSM-FF: ``u + FF(sweep_x(u) + sweep_y(u))``."""

    def __init__(self, cfg: STSSMConfig, bidirectional: bool):
        super().__init__()
        self.sweeps = nn.ModuleList(
            BiSweep(cfg.width, cfg.d_state, cfg.init, cfg.dt_min, cfg.dt_max, bidirectional, "none")
            for _ in range(cfg.dims)
        )
        self.ff = FeedForward(cfg.width, cfg.ff_factor, 2, cfg.ff_weight_norm, False, "gelu")

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        z = None
        for a, sweep in enumerate(self.sweeps):
            y = sweep(h.movedim(1 + a, -2)).movedim(-2, 1 + a)
            z = y if z is None else z + y
        return h + self.ff(z)


class _ZigzagLayer(nn.Module):
    """ST-SSM-VM: sweeps over the grid flattened row-wise (x fastest), then column-wise (y fastest), each
    followed by ``Linear(H, H)`` and a residual."""

    def __init__(self, cfg: STSSMConfig, bidirectional: bool):
        super().__init__()
        self.sweeps = nn.ModuleList(
            BiSweep(cfg.width, cfg.d_state, cfg.init, cfg.dt_min, cfg.dt_max, bidirectional, "none") for _ in range(2)
        )
        self.mix = nn.ModuleList(nn.Linear(cfg.width, cfg.width) for _ in range(2))

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (N, X, Y, H)
        n, X, Y, H = h.shape
        flat = h.transpose(1, 2).reshape(n, Y * X, H)  # x fastest
        h = h + self.mix[0](self.sweeps[0](flat)).reshape(n, Y, X, H).transpose(1, 2)
        flat = h.reshape(n, X * Y, H)  # y fastest
        return h + self.mix[1](self.sweeps[1](flat)).reshape(n, X, Y, H)


_LAYERS = {"sequential": _SequentialLayer, "parallel": _ParallelLayer, "zigzag": _ZigzagLayer}


@register("stssm", STSSMConfig)
class STSSM(nn.Module):
    """ST-SSM, ``model(x, pos=None, ctx=None) -> y``.

    Shapes: ``x (B, T, *spatial, in_channels)`` -> ``y (B, 1, *spatial, out_channels)`` (the next frame;
    ``data.frames_as_channels: false``), or ``x (B, *spatial, in_channels)`` -> ``(B, *spatial, out_channels)``;
    ``ctx (B, ctx_channels)``. See ``forward_sequence`` for all frames at once and the module docstring
    for the architecture.
    """

    def __init__(self, config: STSSMConfig):
        super().__init__()
        self.config = cfg = config
        d = cfg.dims
        H = cfg.width
        self.lifting = nn.Linear(cfg.in_channels + cfg.ctx_channels + (d if cfg.positional_grid else 0), H)
        mult = 1 if cfg.bidirectional else 2
        layer = _LAYERS[cfg.factorization]
        self.pre = nn.ModuleList(layer(cfg, cfg.bidirectional) for _ in range(mult * cfg.n_layers_pre))
        self.memory = (
            S4D(H, cfg.d_state, cfg.init, cfg.dt_min, cfg.dt_max, window=cfg.memory_window)
            if cfg.memory_window > 0
            else None
        )
        self.post = nn.ModuleList(layer(cfg, cfg.bidirectional) for _ in range(mult * cfg.n_layers_post))
        self.projection = ChannelMLP(H, cfg.out_channels, cfg.projection_channels, "gelu")

    # ---------------------------------------------------------------------------------------------
    def _prepare(self, x: torch.Tensor, ctx: torch.Tensor | None, pos) -> tuple[torch.Tensor, bool]:
        """Checks; returns ``x`` in the time layout ``(B, T, *spatial, C)`` and whether it had a time axis."""
        cfg = self.config
        d = cfg.dims
        check_input(
            "STSSM",
            x,
            self,
            f"{grid_shape(d, cfg.in_channels, frames=True)} (data.frames_as_channels: "
            f"false) or one frame {grid_shape(d, cfg.in_channels)}",
            (d + 2, d + 3),
            cfg.in_channels,
        )
        check_grid_extras("STSSM", x.shape[0], pos, ctx, cfg.ctx_channels)
        timed = x.dim() == d + 3
        return (x if timed else x[:, None]), timed

    def _lift(self, x: torch.Tensor, ctx: torch.Tensor | None) -> torch.Tensor:
        """``(B, T, *spatial, C)`` -> ``(B, T, *spatial, H)``."""
        B, T, *spatial, _ = x.shape
        feats = x.flatten(0, 1)
        if self.config.positional_grid:
            feats = torch.cat([feats, periodic_grid(tuple(spatial), B * T, x.dtype, x.device)], dim=-1)
        feats = append_context(feats, None if ctx is None else ctx.repeat_interleave(T, dim=0))
        return self.lifting(feats).unflatten(0, (B, T))

    @staticmethod
    def _spatial(layers: nn.ModuleList, h: torch.Tensor) -> torch.Tensor:
        """Spatial layers on every frame of ``h (B, T, *spatial, H)``."""
        B, T = h.shape[:2]
        h = h.flatten(0, 1)
        for layer in layers:
            h = layer(h)
        return h.unflatten(0, (B, T))

    def temporal(self, h: torch.Tensor) -> torch.Tensor:
        """The memory layer on ``h (B, T, *spatial, H)``: ``h + M(h)`` along time (identity if ``K = 0``)."""
        if self.memory is None:
            return h
        m = self.memory(h.movedim(1, -2)).movedim(-2, 1)
        return m if self.config.residual == "none" else h + m

    def _run(self, x: torch.Tensor, ctx: torch.Tensor | None, last_only: bool) -> torch.Tensor:
        if last_only:
            x = x[:, -max(self.config.memory_window, 1) :]
        h = self._spatial(self.pre, self._lift(x, ctx))
        h = self.temporal(h)
        if last_only:
            h = h[:, -1:]
        return self.projection(self._spatial(self.post, h))

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor | None = None, ctx: torch.Tensor | None = None
    ) -> torch.Tensor:
        x, timed = self._prepare(x, ctx, pos)
        y = self._run(x, ctx, last_only=True)
        return y if timed else y[:, 0]

    def forward_sequence(
        self, x: torch.Tensor, pos: torch.Tensor | None = None, ctx: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Teacher-forced pass: ``x (B, T, *spatial, C_in)`` -> ``y (B, T, *spatial, C_out)``, ``y_t`` the
        prediction of frame ``t + 1`` from frames ``t - K + 1 .. t``."""
        x, timed = self._prepare(x, ctx, pos)
        if not timed:
            raise ValueError("STSSM.forward_sequence needs the time layout (batch, frames, *spatial, channels).")
        return self._run(x, ctx, last_only=False)
