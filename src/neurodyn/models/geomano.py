"""GeoMaNO, the Geometric Mamba Neural Operator (Han, Zhang, Samaras, Hou, Qin 2025), registered as ``"geomano"``.

``a -> v_0 (encode) -> v_1 -> ... -> v_T (T GeoMaNO layers) -> u (decode)`` (paper Eq. 5) on regular 2-D grids,
``x: (B, H, W, C_in) -> (B, H, W, C_out)``::

    X    = [x, ctx, (x1, x2)]                          # input function(s) + normalised coordinates (or unified_pos)
    Z_0  = E(X)                                        # Eq. 6: lift, soft assignment to an h x w latent grid, LN
                                                       #   (neurodyn.nn.geo_encoder.GeoEncoder), + E_pos if pos_embed
    S_t  = Z_{t-1} + GeoMambaKernel(LN(Z_{t-1}))       # Eq. 8 (neurodyn.nn.blocks.ResidualBlock with the kernel
    Z_t  = S_t + MLP(LN(S_t))                          #   of neurodyn.nn.geomamba as its mixer), t = 1..T
    u    = D(Z_T)                                      # Eq. 7: back to the P points with the assignment, Linear(LN)

Navier-Stokes ("a 3-D (x, y, t) domain") is handled as the paper says: the time axis is a feature axis (the
input frames are channels) and the scans run over the 2-D grid; the paper then uses the 1-D GeoMamba-SSM and
the positional embedding. Darcy (2-D) uses the 2DGeoMamba-SSM and no positional embedding (Table 3 / 5).

Options beyond the kernel's (``neurodyn.nn.geomamba``): ``encoder="patch"`` replaces Eq. 6 by a hard
``p x p`` patch embedding (LaMO's ``PatchEmbed2d`` / ``PatchUnembed2d``, zero padding to a multiple of
``p``; docs/papers/notes-geomano.md 2.1 item 5) -- then the token grid is ``ceil(H/p) x ceil(W/p)`` and the
positional embedding (if any) is resized bilinearly from ``latent_grid``. ``decoder`` / ``head`` /
``decoder_skip`` / ``slice_reduce`` / ``assign_prior``: see ``neurodyn.nn.geo_encoder``.

**The defaults are the paper's Darcy configuration** (Table 5, Sec. 5.1, the best row of Table 3a), every
option read as the paper prints it; where the paper is silent (GeoMaNO's code is not public) the value is the
field's practice, from the Transolver standard-benchmark code the paper says it follows or from VMamba /
Mamba, whose kernel it extends. Our own choices are options, off by default. The presets ``geomano/darcy`` and
``geomano/navier_stokes`` hold both benchmarks; their ``paper`` scale uses these readings, their ``cpu`` scale
some of ours (said in the preset). One table, every option whose value is a reading (sizes not listed are the
paper's or the kernel's); the kernel's options, the rows ``correction_form`` to ``dt_rank`` but ``directions``,
are fields of its section ``model.ssm`` (``neurodyn.nn.ssm_config.GeoMambaSSMConfig``; ``ssm_kind`` is
``ssm.kind``, ``merge`` ``ssm.combine``, ``kernel_act`` ``ssm.act``)::

    option             paper (where)                                our default      why
    -----------------  -------------------------------------------  ---------------  -----------------------------------
    correction_form    Eqs. 9-10: sum_s C_s h_s - sum_s R_s Bbar_s  "eq9"            the paper contradicts itself (Alg.
                       x ("eq9"); Alg. 2 line 32: sum_s C_s (h_s -                   2 prints "alg2"); Eq. 9 is the
                       R_s x) ("alg2")                                               method's definition, printed twice
                                                                                     (Eqs. 9, 10), and the one both
                                                                                     remarks cite: Remark 4.1
                                                                                     "input-adaptive residuals
                                                                                     explicitly on Bx: see Eq. 9",
                                                                                     Remark 4.2 "dampen one, two or
                                                                                     three copies of Bx"; Alg. 2
                                                                                     subtracts R_s x, not a copy of Bbar
                                                                                     x, in a GPU-kernel listing with
                                                                                     other misprints (the shapes of
                                                                                     Delta_bias, B, C; lines 15 and 29;
                                                                                     "line 24"). "cbx", sum_s C_s (h_s -
                                                                                     R_s Bbar_s x), ours: removes
                                                                                     exactly the duplicated self term
                                                                                     (option)
    correction,        Darcy: fixed "0011" (Table 3a best = Table   "fixed", "0011"  Darcy; geomano/navier_stokes sets
    r_pattern          1); NS: learnable (Table 3b best)                             "learnable"
    r_order            digit k = k-th of the Sec. 4.2 directions    "paper"          as printed ("vmamba": VMamba's
                       (Remark 4.2)                                                  stack order, option)
    r_init             not stated                                   "zeros"          learnable R starts as the plain
                                                                                     kernel
    ssm_kind           2-D SSM for Darcy, 1-D for NS (Sec. 5.1)     "2d"             Darcy
    directions         row, row_rev, col, col_rev (Sec. 4.2, Fig.2) "paper"          as printed ("corners": ours,
                                                                                     option)
    gate               Alg. 1 lines 4, 5, 13: one Z = Linear(Z)     "shared"         as printed; "split" (VMamba's
                       feeds both the conv and the gate act(Z)                       in_proj D -> 2 ED) is an option
    norm_act           Alg. 1 line 13: act(LN(Y)) * act(Z)          True             as printed (False: VMamba's LN(y))
    d_mode             Remark 4.1: D in R^N; Alg. 2 line 5: D (ED,) "channel"        the paper contradicts itself; Alg.
                                                                                     2 and mamba-ssm (Remark 4.1
                                                                                     describes Mamba's D, which is per
                                                                                     channel)
    merge              CrossMerge (not defined)                     "sum"            VMamba's CrossMerge
    kernel_act         sigma (not defined)                          SiLU             VMamba / Mamba
    ssm.expand         Alg. 1: (B, L, ED) -> (B, L, ED), As (N, ED) 1                as printed
    ssm.d_conv,        Conv (size not given); dt rank, A / D / dt   3 (depthwise),   VMamba / Mamba
    dt_rank, init      initialisation not given                     ceil(D/16), Mamba's
    Bbar               Delta B (Eq. 3, Alg. 2 line 22); App. B Eq.  Delta B          main text and Alg. 2
                       20 writes the exact ZOH
    pos_embed          off on 2-D domains, on for NS (Sec. 4.1,     False            Darcy
                       Table 3)
    encoder            Eq. 6 soft assignment                        "soft"           as printed ("patch": ours, option)
    latent_grid        L not given                                  (8, 8)           64 latent tokens = the 64 slices of
                                                                                     Transolver's Darcy script
    positional_grid    X not specified beyond the input function    True             Transolver appends (x, y); a
                                                                                     point-wise Eq. 6 cannot place
                                                                                     points without them (notes 2.1 item
                                                                                     2)
    lift_hidden, act   "Linear" = biased FFN with activation        c -> 2D -> D,    Transolver's lifting MLP
                       (Sec. 4.1)                                   GELU
    slice_reduce       Eq. 6: Z = LayerNorm(W^T Y)                  "sum"            as printed ("mean": Transolver's)
    assign_prior       none: W = Softmax(Linear(Y)) (Eq. 6)         0                as printed; > 0 is our locality
                                                                                     prior (0.04 against 0.18 test rel.
                                                                                     L2 on Darcy at cpu scale,
                                                                                     benchmarks/RESULTS.md; the cpu
                                                                                     presets use 1)
    decoder            Eq. 7: W = Softmax(Linear_{D -> P}(Z)),      "shared"         Eq. 7 cannot be run as printed (its
                       Y = W^T Z                                                     head, next row); the decoder is
                                                                                     Transolver's deslice with the
                                                                                     encoder's W (resolution
                                                                                     independent); "literal" (n_points)
                                                                                     is Eq. 7's W
    head               Eq. 7: X = LayerNorm(Linear(Y))              "ln_linear"      as printed it returns only the LN
                                                                                     bias for one output channel (Darcy,
                                                                                     NS): refused; Transolver's
                                                                                     Linear(LN(Y))
    mlp_ratio          Eq. 8 "Linear" (FFN, size not given)         1 (GELU)         Transolver's default
    init, assign_init  not stated                                   torch defaults,  Transolver's trunc_normal(0.02)
                                                                    orthogonal W     leaves Eq. 6's assignment uniform
                                                                                     and training stalls (RESULTS.md);
                                                                                     orthogonal: the Transolver / LaMO
                                                                                     slice projection
    decoder_skip       none                                         False            as printed (True: ours)

Navier-Stokes (Table 5 and the best row of Table 3b): ``width=256, ssm.kind="1d", ssm.correction="learnable",
pos_embed=True``; the preset also sets a 16 x 16 latent grid (L not given).

A checkpoint saved before ``correction_form`` defaulted to "eq9" and ``gate`` to "shared" names both (every
saved config names every field); ``LEGACY_DEFAULTS`` gives a saved config that does not name them the values
the model had then ("cbx", "split"). A config saved before ``model.ssm`` held the kernel's options names them
at the top level (``gate``, ``merge``, ...): ``FIELD_MOVES`` says where each is now, and loading a checkpoint
or resuming a run folder moves them (``neurodyn.models.registry.move_fields``).

Parameter count (soft encoder, shared decoder, ln_linear head; ``c = C_in + ctx + 2`` inputs, L latent
tokens, MLP ratio m, per-kernel count ``P_k`` in ``neurodyn.nn.geomamba``)::

    (c 2D + 2D + 2D D + D) + (D L + L) + 2D [+ L D pos_embed]
      + T (4D + P_k + 2 m D^2 + m D + D) + 2D + D C_out + C_out

The paper gives no parameter count; ``tests/models/test_geomano.py`` checks this formula on the paper's
Darcy (272,321 parameters) and Navier-Stokes (3,207,425, with the presets' 16 x 16 latent grid)
configurations (with the shared gate of Algorithm 1; the split gate adds ``T D^2`` per model: 305,089 and
3,731,713).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import nn

from ..errors import ConfigError, check_choice, check_min
from ..nn.blocks import ResidualBlock
from ..nn.geo_encoder import DECODERS, HEADS, GeoDecoder, GeoEncoder
from ..nn.geomamba import GeoMambaKernel
from ..nn.grids import append_context, grid_channels, unified_position
from ..nn.init import trunc_normal_init
from ..nn.mlp import ACTIVATIONS
from ..nn.patch import PatchEmbed2d, PatchUnembed2d, patch_forward, resize_pos_embed
from ..nn.ssm_config import GeoMambaSSMConfig
from .inputs import check_grid2d_input
from .registry import register

__all__ = ["GeoMaNOConfig", "GeoMaNO", "kernel_kwargs"]


@dataclass
class GeoMaNOConfig:
    """Configuration of ``GeoMaNO`` (one line per field: type, default, meaning; the module docstring's table says
    where each default comes from, ``neurodyn.nn.geomamba`` what each kernel option does).

    Attributes:
        in_channels (int, 1): input channels (filled in from the data).
        out_channels (int, 1): output channels (filled in from the data).
        ctx_channels (int, 0): length of the per-sample context ``ctx`` (appended as constant channels).
        width (int, 64): D = ED, the embedding dimension (Table 5: 64 Darcy, 256 NS).
        n_layers (int, 8): T, GeoMaNO layers.
        ssm (GeoMambaSSMConfig, d_state 16, expand 1, d_conv 3, kind "2d", ...): the GeoMamba kernel, every scan
            option (``neurodyn.nn.ssm_config.GeoMambaSSMConfig``: kind, dt_rank, d_mode, combine, gate, norm_act,
            act, correction, r_pattern, r_order, r_init, correction_form, dt_range, backend).
        mlp_ratio (float, 1.0): hidden width of each layer's FFN, as a multiple of D.
        act (str, "gelu"): the FFN's and the lifting's activation.
        directions (str | tuple, "paper"): scan directions: paper | vmamba | corners (2-D only) | a tuple of names.
        encoder (str, "soft"): soft (Eq. 6) | patch (hard p x p patches, patch_size; ours).
        latent_grid (tuple, (8, 8)): (h, w) of the soft encoder's latent tokens (L not given: 64 = Transolver's).
        lift_hidden (int, 0): hidden width of the lifting MLP (0: 2D).
        slice_reduce (str, "sum"): soft encoder: LN(W^T Y) (sum, paper) | weighted mean (mean, Transolver).
        assign_prior (float, 0.0): locality prior of the soft assignment (0: off, the paper; ours).
        assign_init (str, "orthogonal"): the assignment projection: orthogonal (Transolver / LaMO code) | default.
        patch_size (int, 8): patch encoder: p.
        pos_embed (bool, False): a learned latent positional embedding (paper: on for NS, off for Darcy).
        positional_grid (bool, True): append (x1, x2) in [0, 1].
        unified_pos (int, 0): r > 0 replaces the coordinates by their r^2 distances to a reference grid.
        decoder (str, "shared"): shared (the encoder's W) | separate | literal (Eq. 7's W; n_points).
        n_points (int, 0): the literal decoder's fixed point count.
        head (str, "ln_linear"): ln_linear (Linear(LN(Y)), Transolver's) | linear_ln (Eq. 7 as printed).
        decoder_skip (bool, False): add the lifted features before the head (ours).
        init (str, "torch"): torch (PyTorch defaults) | trunc_normal (Transolver: with assign_prior 0 the
            assignment starts uniform and training stalls; benchmarks/RESULTS.md).
    """

    in_channels: int = 1
    out_channels: int = 1
    ctx_channels: int = 0
    width: int = 64
    n_layers: int = 8
    ssm: GeoMambaSSMConfig = field(default_factory=lambda: GeoMambaSSMConfig(d_state=16, expand=1.0, d_conv=3))
    mlp_ratio: float = 1.0
    act: str = "gelu"
    directions: object = "paper"
    encoder: str = "soft"
    latent_grid: tuple = (8, 8)
    lift_hidden: int = 0
    slice_reduce: str = "sum"
    assign_prior: float = 0.0
    assign_init: str = "orthogonal"
    patch_size: int = 8
    pos_embed: bool = False
    positional_grid: bool = True
    unified_pos: int = 0
    decoder: str = "shared"
    n_points: int = 0
    head: str = "ln_linear"
    decoder_skip: bool = False
    init: str = "torch"

    # where the keys of older layouts are now: before the SSM section ``ssm`` was the kind; before the section held
    # every kernel option they were flat (neurodyn.models.registry.move_fields)
    FIELD_MOVES: ClassVar[dict] = {
        "ssm": "ssm.kind", "ssm_kind": "ssm.kind", "dt_rank": "ssm.dt_rank", "d_mode": "ssm.d_mode",
        "merge": "ssm.combine", "gate": "ssm.gate", "norm_act": "ssm.norm_act", "kernel_act": "ssm.act",
        "correction": "ssm.correction", "r_pattern": "ssm.r_pattern", "r_order": "ssm.r_order",
        "r_init": "ssm.r_init", "correction_form": "ssm.correction_form", "dt_range": "ssm.dt_range",
        "scan_backend": "ssm.backend"}
    # a saved config that does not name these fields was made when they defaulted to ours (every config saved by
    # neurodyn names every field; this keeps a hand-written or trimmed one rebuilding the model it trained)
    LEGACY_DEFAULTS: ClassVar[dict] = {"ssm.correction_form": "cbx", "ssm.gate": "split"}

    def __post_init__(self) -> None:
        check_min("geomano", self, ("in_channels", "out_channels", "width", "n_layers"), 1)
        check_min("geomano", self, ("ctx_channels", "unified_pos", "n_points", "lift_hidden"), 0)
        check_choice("geomano encoder ('soft': Eq. 6, 'patch': hard patches)", self.encoder, ("soft", "patch"))
        if self.encoder == "patch" and self.patch_size < 1:
            raise ConfigError(f"geomano patch_size must be >= 1, got {self.patch_size}.")
        check_choice("geomano decoder", self.decoder, DECODERS)
        check_choice("geomano head", self.head, HEADS)
        check_choice("geomano act", str(self.act).lower(), ACTIVATIONS)
        check_choice("geomano assign_init", self.assign_init, ("orthogonal", "default"))
        check_choice("geomano init", self.init, ("trunc_normal", "torch"))
        if len(tuple(self.latent_grid)) != 2 or min(int(s) for s in self.latent_grid) < 1:
            raise ConfigError(f"geomano latent_grid must be (h, w) with h, w >= 1, got {self.latent_grid!r}.")


def kernel_kwargs(cfg: GeoMaNOConfig) -> dict:
    """Keyword arguments of ``GeoMambaKernel`` for a model config."""
    directions = cfg.directions if isinstance(cfg.directions, str) else tuple(cfg.directions)
    k = cfg.ssm
    return dict(d_state=k.d_state, expand=k.expand, d_conv=k.d_conv, dt_rank=k.dt_rank, ssm=k.kind,
                directions=directions, correction=k.correction, r_pattern=k.r_pattern, r_order=k.r_order,
                r_init=k.r_init, correction_form=k.correction_form, d_mode=k.d_mode, merge=k.combine,
                gate=k.gate, norm_act=k.norm_act, act=k.act, dt_range=tuple(k.dt_range), scan_backend=k.backend)


@register("geomano", GeoMaNOConfig)
class GeoMaNO(nn.Module):
    """Geometric Mamba Neural Operator, ``model(x, pos=None, ctx=None) -> y`` (see the module docstring).

    Shapes: ``x (B, H, W, in_channels) -> (B, H, W, out_channels)``; ``ctx (B, ctx_channels)``. Regular grids
    only (as in the paper); with the soft encoder and the shared or separate decoder any resolution works.
    """

    def __init__(self, config: GeoMaNOConfig):
        super().__init__()
        self.config = cfg = config
        D = cfg.width
        coord = cfg.unified_pos ** 2 if cfg.unified_pos else (2 if cfg.positional_grid else 0)
        c_in = cfg.in_channels + cfg.ctx_channels + coord
        grid = tuple(int(s) for s in cfg.latent_grid)
        if cfg.encoder == "soft":
            self.encoder = GeoEncoder(c_in, D, grid, cfg.lift_hidden, cfg.act, cfg.slice_reduce, cfg.pos_embed,
                                      cfg.assign_prior)
            self.decoder = GeoDecoder(D, cfg.out_channels, cfg.decoder, cfg.head, grid, cfg.n_points, cfg.decoder_skip)
            self.patch = self.unpatch = self.pos_embed = None
        else:
            self.encoder = self.decoder = None
            self.patch = PatchEmbed2d(c_in, D, cfg.patch_size)
            self.unpatch = PatchUnembed2d(D, cfg.out_channels, cfg.patch_size)
            self.pos_embed = nn.Parameter(torch.zeros(1, *grid, D)) if cfg.pos_embed else None
            if self.pos_embed is not None:
                nn.init.trunc_normal_(self.pos_embed, std=0.02)
        kw = kernel_kwargs(cfg)
        self.blocks = nn.ModuleList(ResidualBlock(D, GeoMambaKernel(D, **kw), cfg.mlp_ratio, cfg.act)
                                    for _ in range(cfg.n_layers))
        if cfg.init == "trunc_normal":
            trunc_normal_init(self)
        if cfg.encoder == "soft" and cfg.assign_init == "orthogonal":  # Transolver / LaMO code: the slice projection
            for lin in (self.encoder.assign, getattr(self.decoder, "assign", None)):
                if lin is not None:
                    nn.init.orthogonal_(lin.weight)

    def _features(self, x, ctx):
        cfg = self.config
        b, H, W, _ = x.shape
        a = append_context(x, ctx)
        coords = grid_channels((H, W), b, x.dtype, x.device)
        if cfg.unified_pos:
            up = unified_position(coords.reshape(b, H * W, 2), cfg.unified_pos).reshape(b, H, W, -1)
            a = torch.cat([a, up], dim=-1)
        elif cfg.positional_grid:
            a = torch.cat([a, coords], dim=-1)
        return a, coords

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None,
                ctx: torch.Tensor | None = None) -> torch.Tensor:
        cfg = self.config
        check_grid2d_input("GeoMaNO", x, cfg.in_channels, pos, ctx, cfg.ctx_channels, self,
                           pos_hint=" (regular grids only, as in the paper)")
        b, H, W, _ = x.shape
        a, coords = self._features(x, ctx)
        if cfg.encoder == "soft":
            z, w, y = self.encoder(a.reshape(b, H * W, -1), coords.reshape(b, H * W, 2))
            for blk in self.blocks:
                z = blk(z)
            return self.decoder(z, w, y).reshape(b, H, W, cfg.out_channels)
        pe = None if self.pos_embed is None else (lambda hw: resize_pos_embed(self.pos_embed, hw))
        return patch_forward(a, cfg.patch_size, self.patch, self.blocks, self.unpatch, pe)


def kernel_parameter_count(D: int, N: int = 16, expand: float = 1.0, d_conv: int = 3, dt_rank: int = 0, K: int = 4,
                           learnable_r: bool = False, d_mode: str = "channel", gate: str = "split") -> int:
    """``P_k``: parameters of one ``GeoMambaKernel`` with the default layout (see ``neurodyn.nn.geomamba``)."""
    di = int(round(expand * D))
    r = dt_rank or math.ceil(D / 16)
    n = (D * di if gate == "shared" else 2 * D * di) + (di * d_conv ** 2 + di if d_conv > 1 else 0)
    n += K * (r + 2 * N) * di + K * (r * di + di) + K * di * N
    n += {"channel": K * di, "state": K * N, "none": 0}[d_mode]
    n += K * di * N if learnable_r else 0
    return n + 2 * di + di * D


def parameter_count(cfg: GeoMaNOConfig) -> int:
    """Closed-form parameter count of ``GeoMaNO(cfg)`` (soft encoder, shared decoder, ln_linear head)."""
    D, L = cfg.width, int(cfg.latent_grid[0]) * int(cfg.latent_grid[1])
    c = cfg.in_channels + cfg.ctx_channels + (cfg.unified_pos ** 2 if cfg.unified_pos else 2 * cfg.positional_grid)
    h = cfg.lift_hidden or 2 * D
    enc = c * h + h + h * D + D + D * L + L + 2 * D + (L * D if cfg.pos_embed else 0)
    K = 4 if isinstance(cfg.directions, str) else len(tuple(cfg.directions))
    k = cfg.ssm
    pk = kernel_parameter_count(D, k.d_state, k.expand, k.d_conv, k.dt_rank, K, k.correction == "learnable",
                                k.d_mode, k.gate)
    m = int(round(D * cfg.mlp_ratio))
    layer = 4 * D + pk + (2 * D * m + m + D if m > 0 else -2 * D)
    return enc + cfg.n_layers * layer + 2 * D + D * cfg.out_channels + cfg.out_channels
