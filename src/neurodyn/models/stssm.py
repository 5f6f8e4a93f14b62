"""ST-SSM, the spatiotemporal state-space neural operator (Koren & Lanthaler, arXiv 2507.23428 v1), and its
variants ST-SSM-VM, ST-SSM-FF, unidirectional and without temporal memory, registered as ``"stssm"``.

The model is ``Psi = Q o L_4 o L_3 o M o L_2 o L_1 o R`` (paper §3.4): two spatial layers, the causal
temporal memory layer, two more spatial layers, with pointwise lifting ``R`` and projection ``Q``. For an
input of ``T`` frames ``x: (B, T, *spatial, C_in)`` (channels last; ``C_in`` = field channels plus context
fields)::

    h_t   = R([x_t, grid, ctx])                 R = Linear(C_in + d + n_ctx -> H), per point and frame
    h_t  <- L_2 L_1 h_t                         spatial layers, each frame on its own
    h    <- h + M(h)                            causal S4D along time at every point, kernel of K taps
    y_t   = Q(L_4 L_3 h_t)                      Q = Linear(H -> 4H) -> GELU -> Linear(4H -> C_out)

``y_t`` is the prediction of frame ``t + 1``; by the truncated kernel it depends on frames
``t - K + 1 .. t`` only (tested by autograd). ``forward`` returns the next frame ``(B, 1, *spatial, C_out)``
and computes only what that needs (the last ``max(K, 1)`` frames before ``M``, the last one after);
``forward_sequence`` returns ``y_t`` for every ``t``, ``(B, T, *spatial, C_out)``: the teacher-forced pass
of the paper's App. H in one call. A single frame without a time axis, ``(B, *spatial, C_in)``, gives
``(B, *spatial, C_out)`` (a Markovian use). ``grid`` holds the coordinates ``i / n_a`` in [0, 1) (App. E.4:
``E_i = i / L``), ``ctx (B, n_ctx)`` is broadcast over the grid (viscosity), context *fields* (forcing)
arrive as extra input channels.

**Spatial layer** (``factorization``), with ``S^a_fwd``, ``S^a_bwd`` S4D blocks (``neurodyn.nn.s4d.S4D``,
20,736 parameters each at ``H = N = 64``) running along axis ``a`` and ``flip_a`` reversing that axis::

    sweep_a(u) = S^a_fwd(u) + flip_a(S^a_bwd(flip_a(u)))             bidirectional: sees both sides

* ``"sequential"`` (ST-SSM): ``u <- u + sweep_x(u)``, then ``u <- u + sweep_y(u)``: axes swept one after
  the other (x then y), each sweep with a residual;
* ``"parallel"`` (ST-SSM-FF, App. D listing 2): ``u <- u + FF(sweep_x(u) + sweep_y(u))`` with FFNO's
  feed-forward (``nn.mlp.FeedForward``, factor 4, weight norm: 33,408 parameters);
* ``"zigzag"`` (ST-SSM-VM, App. D listing 1): the grid flattened row by row (``x`` fastest) is swept as one
  sequence of ``X*Y`` points, ``u <- u + W_1 sweep(u)``, then flattened column by column (``y`` fastest),
  ``u <- u + W_2 sweep'(u)``; ``W_1, W_2`` are ``Linear(H, H)``.

``bidirectional=False`` drops ``S_bwd`` and doubles the number of spatial layers (App. C.1: "8 layers of
forward-only spatial SSM blocks", same parameter count): every output then depends only on inputs at
smaller or equal coordinates, i.e. it lacks the "full field of view" of the universality theorem.

**Temporal memory.** ``M`` is one S4D block along time whose kernel is cut to ``K = memory_window`` taps
(default 4, "non-Markovian models use a fixed memory window of K = 4"); ``memory_window = 0`` removes it
(the identity; the ablation "ST-SSM without temporal module", 20,736 fewer parameters).

**Parameter counts** (exact, tests/models/test_stssm.py; the paper's counts fix the architecture, see
``docs/papers/notes-stssm.md`` §2.5): lifting ``(C_in + d + 1) H``, ``n_blocks x 20,736`` and ``Q`` = 16,897::

    1D ST-SSM: 192 + 9 * 20,736 + 16,897 = 203,713        (8 spatial + 1 temporal block)
    2D ST-SSM: 256 + 17 * 20,736 + 16,897 = 369,665       (16 spatial + 1 temporal block)
    2D ST-SSM-VM: 369,665 + 8 * 4,160 = 402,945           (2 Linear(64, 64) per spatial layer)
    2D ST-SSM-FF: 369,665 + 4 * 33,408 = 503,297          (one FFNO feed-forward per spatial layer)

Every reading, in one table (no ST-SSM code is public: where the paper is silent the value is the S4 / FFNO
practice; the ``stssm/*`` presets' ``paper`` scale uses these defaults)::

    option               paper (where)                                our default   why
    -------------------  -------------------------------------------  ------------  ---------------------------------
    width,               H = 64 (App. E.4); K = 4 (Sec. 5)            64, 4         as printed
    memory_window
    n_layers_pre / post  2 + 2 spatial layers (Sec. 3.4; the listing   2, 2          the text and the printed counts
                         shows 1 + 1)                                                (the paper contradicts itself)
    projection_channels  Q hidden 128 (App. E.4)                      256 (= 4H)    only 256 gives the printed totals
                                                                                     (203,713 1-D, 369,665 2-D): the
                                                                                     paper contradicts itself
    d_state              not stated                                   64            the only size giving the printed
                                                                                     counts
    factorization        sequential x then y (Sec. 3.3); -FF / -VM:   "sequential"  as printed ("parallel", "zigzag":
                         App. D listings                                             the variants)
    bidirectional        forward + backward per axis (Sec. 3.3)       True          as printed (False: App.
                                                                                     C.1, twice the layers)
    residual             Fig. 2: "each path includes a residual        "layer"       the paper contradicts itself
                         connection"; the pseudocode: none                           (caption vs listing): one identity
                                                                                     per sweep, u + S_fwd(u) + flip
                                                                                     S_bwd(flip u), the residual of an
                                                                                     S4 block; "path" (2u + ..., the
                                                                                     identity doubles at every sweep)
                                                                                     and "none" (the listing) are
                                                                                     options
    init, dt_min, dt_max not stated                                   S4D-LegS,     S4's diagonal defaults
                                                                      [1e-3, 1e-1]
    FFT convolution      not stated                                   zero-padded   S4's (non-periodic although the
                                                                                     data are periodic; notes 2.2)
    positional_grid      E_i = i / L (App. E.4)                       i / n         as printed
    ff_factor,           ST-SSM-FF's feed-forward (App. D listing 2)  4, True       FFNO's fourierflow settings, the
    ff_weight_norm                                                                   ones that give the printed counts

Noise, normalisation, teacher forcing and the loss live in the task and the presets (``experiments/stssm``).
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
            raise ConfigError(f"STSSM factorization={self.factorization!r} (ST-SSM-FF / -VM) is a 2-D variant; "
                              "with dims=1 use 'sequential'.")


class BiSweep(nn.Module):
    """``S_fwd(u) + flip(S_bwd(flip(u)))`` along axis ``-2`` of ``u (..., L, H)`` (forward only if not
    ``bidirectional``); ``residual`` "layer" adds ``u``, "path" adds ``u`` once per direction."""

    def __init__(self, width: int, d_state: int, init: str, dt_min: float, dt_max: float,
                 bidirectional: bool = True, residual: str = "none"):
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
            for _ in range(cfg.dims))

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
            for _ in range(cfg.dims))
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
            BiSweep(cfg.width, cfg.d_state, cfg.init, cfg.dt_min, cfg.dt_max, bidirectional, "none")
            for _ in range(2))
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
        self.memory = (S4D(H, cfg.d_state, cfg.init, cfg.dt_min, cfg.dt_max, window=cfg.memory_window)
                       if cfg.memory_window > 0 else None)
        self.post = nn.ModuleList(layer(cfg, cfg.bidirectional) for _ in range(mult * cfg.n_layers_post))
        self.projection = ChannelMLP(H, cfg.out_channels, cfg.projection_channels, "gelu")

    # ---------------------------------------------------------------------------------------------
    def _prepare(self, x: torch.Tensor, ctx: torch.Tensor | None, pos) -> tuple[torch.Tensor, bool]:
        """Checks; returns ``x`` in the time layout ``(B, T, *spatial, C)`` and whether it had a time axis."""
        cfg = self.config
        d = cfg.dims
        check_input("STSSM", x, self, f"{grid_shape(d, cfg.in_channels, frames=True)} (data.frames_as_channels: "
                    f"false) or one frame {grid_shape(d, cfg.in_channels)}", (d + 2, d + 3), cfg.in_channels)
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
            x = x[:, -max(self.config.memory_window, 1):]
        h = self._spatial(self.pre, self._lift(x, ctx))
        h = self.temporal(h)
        if last_only:
            h = h[:, -1:]
        return self.projection(self._spatial(self.post, h))

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None,
                ctx: torch.Tensor | None = None) -> torch.Tensor:
        x, timed = self._prepare(x, ctx, pos)
        y = self._run(x, ctx, last_only=True)
        return y if timed else y[:, 0]

    def forward_sequence(self, x: torch.Tensor, pos: torch.Tensor | None = None,
                         ctx: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher-forced pass: ``x (B, T, *spatial, C_in)`` -> ``y (B, T, *spatial, C_out)``, ``y_t`` the
        prediction of frame ``t + 1`` from frames ``t - K + 1 .. t``."""
        x, timed = self._prepare(x, ctx, pos)
        if not timed:
            raise ValueError("STSSM.forward_sequence needs the time layout (batch, frames, *spatial, channels).")
        return self._run(x, ctx, last_only=False)
