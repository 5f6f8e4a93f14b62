"""GeoMaNO, the Geometric Mamba Neural Operator (Han, Zhang, Samaras, Hou, Qin 2025), registered as ``"geomano"``.

``a -> v_0 -> v_1 -> ... -> v_T -> u`` (paper Eq. 5) on regular 2-D grids, ``x: (B, H, W, C_in) -> (B, H, W, C_out)``::

    Z_0 = E([x, ctx, grid])                   # Eq. 6: lift, soft assignment to an h x w latent grid, LN (+ E_pos)
    S_t = Z_{t-1} + GeoMambaKernel(LN(Z_{t-1}))   # Eq. 8, t = 1..T (kernel: neurodyn.nn.geomamba)
    Z_t = S_t + MLP(LN(S_t))
    u   = D(Z_T)                              # Eq. 7: back to the points with the assignment, Linear(LN)

Navier-Stokes puts the input frames on the channel axis and scans the 2-D grid (1-D GeoMamba-SSM, positional
embedding); Darcy uses the 2DGeoMamba-SSM without one. The defaults are the paper's Darcy configuration
(Table 5, best row of Table 3a); where the paper is silent, Transolver's or VMamba's practice.

Choices that matter (each an option; the full paper-vs-code table is in
docs/papers/notes-geomano.md#geomano-model-paper-vs-code):

* ``ssm.correction_form="eq9"``: Eqs. 9-10 as printed (Algorithm 2's "alg2" and our "cbx" are options).
* ``decoder="shared"``, ``head="ln_linear"``: Eq. 7 cannot run as printed; Transolver's deslice and head.
* ``encoder="soft"`` (``"patch"``: ours), ``latent_grid=(8, 8)``, ``assign_prior=0`` (> 0: our locality prior).

Parameter count: :func:`parameter_count` below (the formula with its terms is in the notes section above),
checked in ``tests/models/test_geomano.py``: 272,321 for the paper's Darcy configuration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

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
            assignment starts uniform and training stalls; the results summary).
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
    return dict(
        d_state=k.d_state,
        expand=k.expand,
        d_conv=k.d_conv,
        dt_rank=k.dt_rank,
        ssm=k.kind,
        directions=directions,
        correction=k.correction,
        r_pattern=k.r_pattern,
        r_order=k.r_order,
        r_init=k.r_init,
        correction_form=k.correction_form,
        d_mode=k.d_mode,
        merge=k.combine,
        gate=k.gate,
        norm_act=k.norm_act,
        act=k.act,
        dt_range=tuple(k.dt_range),
        scan_backend=k.backend,
    )


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
        coord = cfg.unified_pos**2 if cfg.unified_pos else (2 if cfg.positional_grid else 0)
        c_in = cfg.in_channels + cfg.ctx_channels + coord
        grid = tuple(int(s) for s in cfg.latent_grid)
        if cfg.encoder == "soft":
            self.encoder = GeoEncoder(
                c_in, D, grid, cfg.lift_hidden, cfg.act, cfg.slice_reduce, cfg.pos_embed, cfg.assign_prior
            )
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
        self.blocks = nn.ModuleList(
            ResidualBlock(D, GeoMambaKernel(D, **kw), cfg.mlp_ratio, cfg.act) for _ in range(cfg.n_layers)
        )
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

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor | None = None, ctx: torch.Tensor | None = None
    ) -> torch.Tensor:
        cfg = self.config
        check_grid2d_input(
            "GeoMaNO",
            x,
            cfg.in_channels,
            pos,
            ctx,
            cfg.ctx_channels,
            self,
            pos_hint=" (regular grids only, as in the paper)",
        )
        b, H, W, _ = x.shape
        a, coords = self._features(x, ctx)
        if cfg.encoder == "soft":
            z, w, y = self.encoder(a.reshape(b, H * W, -1), coords.reshape(b, H * W, 2))
            for blk in self.blocks:
                z = blk(z)
            return self.decoder(z, w, y).reshape(b, H, W, cfg.out_channels)
        pe = None if self.pos_embed is None else (lambda hw: resize_pos_embed(self.pos_embed, hw))
        return patch_forward(a, cfg.patch_size, self.patch, self.blocks, self.unpatch, pe)


def kernel_parameter_count(
    D: int,
    N: int = 16,
    expand: float = 1.0,
    d_conv: int = 3,
    dt_rank: int = 0,
    K: int = 4,
    learnable_r: bool = False,
    d_mode: str = "channel",
    gate: str = "split",
) -> int:
    """``P_k``: parameters of one ``GeoMambaKernel`` with the default layout (see ``neurodyn.nn.geomamba``)."""
    di = int(round(expand * D))
    r = dt_rank or math.ceil(D / 16)
    n = (D * di if gate == "shared" else 2 * D * di) + (di * d_conv**2 + di if d_conv > 1 else 0)
    n += K * (r + 2 * N) * di + K * (r * di + di) + K * di * N
    n += {"channel": K * di, "state": K * N, "none": 0}[d_mode]
    n += K * di * N if learnable_r else 0
    return n + 2 * di + di * D


def parameter_count(cfg: GeoMaNOConfig) -> int:
    """Closed-form parameter count of ``GeoMaNO(cfg)`` (soft encoder, shared decoder, ln_linear head)."""
    D, L = cfg.width, int(cfg.latent_grid[0]) * int(cfg.latent_grid[1])
    c = cfg.in_channels + cfg.ctx_channels + (cfg.unified_pos**2 if cfg.unified_pos else 2 * cfg.positional_grid)
    h = cfg.lift_hidden or 2 * D
    enc = c * h + h + h * D + D + D * L + L + 2 * D + (L * D if cfg.pos_embed else 0)
    K = 4 if isinstance(cfg.directions, str) else len(tuple(cfg.directions))
    k = cfg.ssm
    pk = kernel_parameter_count(
        D, k.d_state, k.expand, k.d_conv, k.dt_rank, K, k.correction == "learnable", k.d_mode, k.gate
    )
    m = int(round(D * cfg.mlp_ratio))
    layer = 4 * D + pk + (2 * D * m + m + D if m > 0 else -2 * D)
    return enc + cfg.n_layers * layer + 2 * D + D * cfg.out_channels + cfg.out_channels
