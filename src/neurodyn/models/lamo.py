"""LaMO, the Latent Mamba Operator (Tiwari, Dutta, Krishnan, Prathosh, ICML 2025), as two registered models.

``G = Q o D o L^l o ... o L^1 o E o P`` (paper Eq. 8): lift, encode N physical tokens into M latent tokens, mix
them with a multi-head bidirectional (or four-directional) selective SSM in L pre-norm residual layers, decode
back to the points and project. The paper's Table 1 has three geometries; the authors' code two model families,
registered here as:

``"lamo"`` (:class:`LaMO`, the code's ``LaMO_Regular_Grid``): regular grids, the paper's Darcy and Navier-Stokes
(``lamo/darcy``, ``lamo/ns``), ``x: (B, H, W, C_in) -> (B, H, W, C_out)``::

    Z^0 = LayerNorm(Linear(p x p patches of [x, ctx, grid])) + E_pos     # zero-padded to pad_multiple
    Z^l = Z^{l-1} + SSM4(LN(Z^{l-1})),  Z^l <- Z^l + MLP(LN(Z^l))        # Eqs. 11-12 on the (H/p, W/p) grid
    u   = crop(DePatch(Z^L))

``"lamo_mesh"`` (:class:`LaMOMesh`, the code's ``LaMO_Structured_Mesh_2D`` and ``LaMO_Irregular_Mesh``): meshes
and point clouds, the paper's Pipe and Airfoil (``geometry="structured_mesh"``, ``x: (B, H, W, C_in)`` on the mesh
index grid; ``lamo/pipe``, ``lamo/airfoil_geofno``) and Elasticity (``geometry="point_cloud"``, ``x: (B, N,
C_in)``, optional ``pos: (B, N, d)``; ``lamo/elasticity``)::

    h = MLP([pos, x, ctx, grid]) + placeholder
    per block:  W = softmax(Linear(Proj_x LN_1(h)) / tau)  (B, He, N, M);  Z = W^T Proj_f(LN_1(h)) / sum_n W
                h <- h + Linear(W Z'),  Z' = SSM2(Z)  (bidirectional over the M latent tokens);  h <- h + MLP(LN_2(h))
    u = Linear(LN_3(h))

Both share one config section for what they have in common (:class:`LatentSSMOperatorConfig`: the width, the
layers, the latent SSM ``ssm`` and its scan ``directions``); each adds its own tokenisation.

Choices that matter (each an option; the full paper-vs-code table, with where the paper prints each value, is in
docs/papers/notes-lamo.md#lamo-model-paper-vs-code):

* ``ssm.*`` (``neurodyn.nn.ssm_config.LatentSSMConfig``): heads, Mamba-2 heads (``a_mode``/``dt_mode`` "head"),
  Euler discretisation, ``layout``, ``norm``: the authors' code where the paper contradicts itself.
* ``directions``: "auto" = "cross" on grids (the code's VMamba cross-scan), "bi" on meshes.
* ``decoder="shared"``: the encoder's W reused (Thm. B.12's proof and the code), not Eq. 14's fixed-N softmax.
* ``share_encoder``: one encoder for every block (App. D.2), recomputed on each block's ``LN_1(h)``.
* ``grid_transfer="resample"`` (ours): another resolution is resampled onto ``grid_size`` and back; "tokens" lets
  the token grid grow (4.1x the error against 1.07x, the results summary).

Parameter counts for Table 6 and the authors' scripts: ``tests/models/test_lamo.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from ..errors import ConfigError, check_choice, check_min
from ..nn.blocks import ResidualBlock
from ..nn.grids import append_context, grid_channels
from ..nn.init import trunc_normal_init
from ..nn.mamba import LatentSSM, mixer_directions
from ..nn.mlp import ACTIVATIONS
from ..nn.patch import PatchEmbed2d, PatchUnembed2d, patch_forward, resize_pos_embed
from ..nn.point_operator import PointOperator, mesh_features
from ..nn.slice import SliceDecoder, SliceEncoder, slice_clamp
from ..nn.ssm_config import LatentSSMConfig
from ..ops.resample import resample_grid
from .inputs import check_grid2d_input, check_mesh_input
from .registry import register

__all__ = [
    "LatentSSMOperatorConfig",
    "LaMOConfig",
    "LaMOMeshConfig",
    "LaMO",
    "LaMOMesh",
    "LatentSliceMixer",
    "GEOMETRIES",
]

GEOMETRIES = ("structured_mesh", "point_cloud")
GRID_TRANSFERS = ("resample", "tokens")


@dataclass
class LatentSSMOperatorConfig:
    """What both LaMO models share: the channels, the latent blocks and their SSM (one line per field: type,
    default, meaning).

    Attributes:
        in_channels (int, 1): input channels (filled in from the data).
        out_channels (int, 1): output channels (filled in from the data).
        width (int, 64): embedding dimension D.
        n_layers (int, 8): latent blocks L.
        mlp_ratio (float, 4.0): hidden width of each block's channel MLP, as a multiple of D.
        act (str, "gelu"): the channel MLP's activation.
        ssm (LatentSSMConfig, d_state 64, expand 2, d_conv 3, heads 4, ...): the latent SSM, every scan option
            (``neurodyn.nn.ssm_config.LatentSSMConfig``: heads, groups, layout, conv, combine, norm, act,
            discretization, a_mode, a_init, dt_mode, a_init_range, dt_range, backend).
        directions (str | tuple, "auto"): scan orders: auto (grid: cross, meshes: bi) | uni | bi | cross | corners
            (grids) | a tuple of names (``neurodyn.nn.mamba.mixer_directions``).
        positional_grid (bool, True): append linspace(0, 1) coordinates of the (index) grid (grid, structured mesh).
        ctx_channels (int, 0): length of ``ctx`` (appended as constant channels; with time_embedding the time).
        init (str, "auto"): auto (torch defaults on grids, trunc_normal on meshes) | trunc_normal | torch.
    """

    in_channels: int = 1
    out_channels: int = 1
    width: int = 64
    n_layers: int = 8
    mlp_ratio: float = 4.0
    act: str = "gelu"
    ssm: LatentSSMConfig = field(default_factory=lambda: LatentSSMConfig(d_state=64, expand=2.0, d_conv=3))
    directions: str | tuple = "auto"
    positional_grid: bool = True
    ctx_channels: int = 0
    init: str = "auto"

    def _check_shared(self, name: str) -> None:
        check_min(name, self, ("in_channels", "out_channels", "width", "n_layers"), 1)
        check_min(name, self, ("ctx_channels",), 0)
        check_choice(f"{name} act", str(self.act).lower(), ACTIVATIONS)
        check_choice(f"{name} init", self.init, ("auto", "trunc_normal", "torch"))


@dataclass
class LaMOConfig(LatentSSMOperatorConfig):
    """Configuration of ``LaMO`` on regular grids, registered as ``"lamo"`` (one line per field: type, default,
    meaning; the module docstring's table says where each default comes from).

    Attributes:
        in_channels (int, 1): input channels (filled in from the data).
        out_channels (int, 1): output channels (filled in from the data).
        width (int, 64): embedding dimension D.
        n_layers (int, 8): latent blocks L.
        mlp_ratio (float, 4.0): hidden width of each block's channel MLP, as a multiple of D.
        act (str, "gelu"): the channel MLP's activation.
        ssm (LatentSSMConfig, d_state 64, expand 2, d_conv 3, heads 4, ...): the latent SSM (the shared section).
        directions (str | tuple, "auto"): scan orders on the token grid: auto (cross) | uni | bi | cross | corners |
            a tuple of names.
        positional_grid (bool, True): append linspace(0, 1) coordinates of the grid.
        ctx_channels (int, 0): length of ``ctx`` (appended as constant channels).
        init (str, "auto"): auto (torch defaults) | trunc_normal | torch.
        patch_size (int, 2): p x p patches per token.
        pad_multiple (int, 0): zero-pad H, W to a multiple of this (0: patch_size).
        grid_size (tuple, (85, 85)): the training grid (H, W); sizes the positional embedding.
        grid_transfer (str, "resample"): inputs of another size: resample (onto grid_size) | tokens.
        pos_embed (bool, True): a learned positional embedding of the token grid (zeros at first).
        pos_embed_interp (bool, True): resize the positional embedding bilinearly for another token grid.
    """

    patch_size: int = 2
    pad_multiple: int = 0
    grid_size: tuple = (85, 85)
    grid_transfer: str = "resample"
    pos_embed: bool = True
    pos_embed_interp: bool = True

    def __post_init__(self) -> None:
        self._check_shared("lamo")
        check_min("lamo", self, ("pad_multiple",), 0)
        if self.patch_size < 1:
            raise ConfigError(f"lamo patch_size must be >= 1, got {self.patch_size}.")
        if len(tuple(self.grid_size)) != 2 or min(int(s) for s in self.grid_size) < 1:
            raise ConfigError(f"lamo grid_size must be (H, W) of the nominal input grid, got {self.grid_size!r}.")
        check_choice("lamo grid_transfer", self.grid_transfer, GRID_TRANSFERS)


@dataclass
class LaMOMeshConfig(LatentSSMOperatorConfig):
    """Configuration of ``LaMOMesh`` on meshes and point clouds, registered as ``"lamo_mesh"`` (one line per field:
    type, default, meaning).

    Attributes:
        in_channels (int, 1): input channels (filled in from the data).
        out_channels (int, 1): output channels (filled in from the data).
        width (int, 64): embedding dimension D.
        n_layers (int, 8): latent blocks L.
        mlp_ratio (float, 4.0): hidden width of each block's channel MLP, as a multiple of D.
        act (str, "gelu"): the channel MLP's activation.
        ssm (LatentSSMConfig, d_state 64, expand 2, d_conv 3, heads 4, ...): the latent SSM (the shared section).
        directions (str | tuple, "auto"): scan orders over the latent tokens: auto (bi) | uni | bi | a tuple of names.
        positional_grid (bool, True): structured meshes: append linspace(0, 1) coordinates of the index grid.
        ctx_channels (int, 0): length of ``ctx`` (appended as constant channels; with time_embedding the time).
        init (str, "auto"): auto (trunc_normal) | trunc_normal | torch.
        geometry (str, "structured_mesh"): structured_mesh (``x (B, H, W, C)`` on the mesh index grid: Pipe,
            Airfoil) | point_cloud (``x (B, N, C)``: Elasticity).
        n_slices (int, 64): latent tokens M.
        slice_heads (int, 8): slice heads; must divide width.
        slice_temperature (float, 0.5): initial softmax temperature of the slice weights.
        slice_clamp (tuple | None, None): temperature clamp (None: [0.1, 5] on structured meshes, none on point
            clouds; (): off).
        share_encoder (bool, True): one slice encoder for every block (App. D.2's shared weights).
        decoder (str, "shared"): shared (the encoder's W) | separate | literal (Eq. 14; n_points).
        n_points (int, 0): the fixed point count of the literal decoder.
        slice_normalize (bool, True): slice tokens are weighted means (False: plain sums, Eq. 10).
        slice_value_projection (bool, True): a separate value projection (False: Eq. 9's one projection).
        pos_channels (int, 0): channels of ``pos`` used as input features (0: ``pos`` ignored, e.g. when the
            coordinates are ``x`` itself, as for Elasticity).
        placeholder (bool, True): a learned vector added after the lifting (the code's).
        time_embedding (bool, False): ``ctx[:, 0]`` as a time, sinusoidal embedding -> Linear-SiLU-Linear added after
            the lifting.
    """

    geometry: str = "structured_mesh"
    n_slices: int = 64
    slice_heads: int = 8
    slice_temperature: float = 0.5
    slice_clamp: tuple | None = None
    share_encoder: bool = True
    decoder: str = "shared"
    n_points: int = 0
    slice_normalize: bool = True
    slice_value_projection: bool = True
    pos_channels: int = 0
    placeholder: bool = True
    time_embedding: bool = False

    def __post_init__(self) -> None:
        check_choice("lamo_mesh geometry", self.geometry, GEOMETRIES)
        self._check_shared("lamo_mesh")
        check_min("lamo_mesh", self, ("pos_channels", "n_points"), 0)
        if self.time_embedding and self.ctx_channels < 1:
            raise ConfigError("lamo_mesh time_embedding reads the time from ctx[:, 0]; set ctx_channels >= 1.")
        if self.slice_heads < 1 or self.width % self.slice_heads:
            raise ConfigError(f"lamo_mesh width ({self.width}) must be divisible by slice_heads ({self.slice_heads}).")

    @property
    def structured(self) -> bool:
        """Whether the points are a structured mesh's ``(H, W)`` index grid (else a point cloud)."""
        return self.geometry == "structured_mesh"


class LatentSliceMixer(nn.Module):
    """``u (B, N, D) -> Linear(decode(SSM(encode(u))))``: LaMO's latent SSM on slice tokens (one block)."""

    def __init__(self, encoder: SliceEncoder, ssm: nn.Module, decoder: SliceDecoder, dim: int):
        super().__init__()
        self.encoder, self.ssm, self.decoder = encoder, ssm, decoder
        self.to_out = nn.Linear(dim, dim)

    def forward(self, u: torch.Tensor, grid=None, mask: torch.Tensor | None = None) -> torch.Tensor:
        z, w = self.encoder(u, grid, mask)  # (B, He, M, dh), (B, He, N, M)
        b, he, m, dh = z.shape
        seq = self.ssm(z.permute(0, 2, 1, 3).reshape(b, m, he * dh))  # latent tokens in slice order
        z = seq.reshape(b, m, he, dh).permute(0, 2, 1, 3)
        return self.to_out(self.decoder(z, w, u, grid))


def _ssm(cfg: LatentSSMOperatorConfig, auto: str, grid: bool) -> LatentSSM:
    """One block's latent SSM from the shared section (``directions="auto"``: ``auto``)."""
    directions = auto if cfg.directions == "auto" else cfg.directions
    return LatentSSM(cfg.ssm, cfg.width, mixer_directions(directions, grid))


@register("lamo", LaMOConfig)
class LaMO(nn.Module):
    """Latent Mamba Operator on regular grids, ``model(x, pos=None, ctx=None) -> y`` (see the module docstring):
    ``x (B, H, W, in_channels) -> (B, H, W, out_channels)``, ``ctx (B, ctx_channels)``. Cost is linear in the number
    of patches. Meshes and point clouds: :class:`LaMOMesh` (``"lamo_mesh"``).
    """

    def __init__(self, config: LaMOConfig):
        super().__init__()
        self.config = cfg = config
        D = cfg.width
        c_in = cfg.in_channels + cfg.ctx_channels + (2 if cfg.positional_grid else 0)
        self.patch = PatchEmbed2d(c_in, D, cfg.patch_size)
        self.multiple = math.lcm(cfg.patch_size, cfg.pad_multiple or cfg.patch_size)
        hp, wp = (-(-int(s) // self.multiple) * self.multiple // cfg.patch_size for s in cfg.grid_size)
        self.token_grid = (hp, wp)
        self.pos_embed = nn.Parameter(torch.zeros(1, hp, wp, D)) if cfg.pos_embed else None
        self.blocks = nn.ModuleList(
            ResidualBlock(D, _ssm(cfg, "cross", grid=True), cfg.mlp_ratio, cfg.act) for _ in range(cfg.n_layers)
        )
        self.unpatch = PatchUnembed2d(D, cfg.out_channels, cfg.patch_size)
        if cfg.init == "trunc_normal":
            trunc_normal_init(self)

    def _grid_pos_embed(self, hw: tuple[int, int]) -> torch.Tensor | None:
        if self.pos_embed is None:
            return None
        if hw != self.token_grid and not self.config.pos_embed_interp:
            raise ValueError(
                f"LaMO was built for a {self.token_grid} token grid (grid_size="
                f"{tuple(self.config.grid_size)}) but the input gives {hw} tokens; set "
                "pos_embed_interp=True or grid_size to the input resolution."
            )
        return resize_pos_embed(self.pos_embed, hw)

    def forward(
        self,
        x: torch.Tensor,
        pos: torch.Tensor | None = None,
        ctx: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        cfg = self.config
        if mask is not None:
            raise ValueError(
                "LaMO (grid) takes no point mask; masks are for padded point clouds "
                "(model lamo_mesh, geometry='point_cloud')"
            )
        check_grid2d_input(
            "LaMO (grid)",
            x,
            cfg.in_channels,
            pos,
            ctx,
            cfg.ctx_channels,
            self,
            pos_hint=" (use model lamo_mesh with geometry='point_cloud' for scattered points)",
        )
        size, nominal = tuple(x.shape[1:3]), tuple(int(s) for s in cfg.grid_size)
        resample = cfg.grid_transfer == "resample" and size != nominal
        if resample:
            x = resample_grid(x, nominal)
        a = append_context(x, ctx)
        if cfg.positional_grid:
            a = torch.cat([a, grid_channels(tuple(x.shape[1:3]), x.shape[0], x.dtype, x.device)], dim=-1)
        y = patch_forward(a, self.multiple, self.patch, self.blocks, self.unpatch, self._grid_pos_embed)
        return resample_grid(y, size) if resample else y


@register("lamo_mesh", LaMOMeshConfig)
class LaMOMesh(PointOperator):
    """Latent Mamba Operator on meshes and point clouds, ``model(x, pos=None, ctx=None, mask=None) -> y`` (see the
    module docstring): structured mesh ``x (B, H, W, in_channels) -> (B, H, W, out_channels)``; point cloud
    ``x (B, N, in_channels)``, ``pos (B, N, pos_channels)``, ``mask (B, N)`` for padded clouds ->
    ``(B, N, out_channels)``; ``ctx (B, ctx_channels)``. Cost is linear in the number of points N.
    """

    def __init__(self, config: LaMOMeshConfig):
        super().__init__()
        self.config = cfg = config
        D = cfg.width
        enc_kw = dict(
            projection="conv2d" if cfg.structured else "linear",
            temperature=cfg.slice_temperature,
            clamp=slice_clamp(cfg.slice_clamp, cfg.structured),
        )
        self._init_lifting(
            cfg.in_channels
            + cfg.pos_channels
            + (0 if cfg.time_embedding else cfg.ctx_channels)
            + (2 if cfg.structured and cfg.positional_grid else 0)
        )

        def encoder() -> SliceEncoder:
            return SliceEncoder(
                D,
                cfg.slice_heads,
                cfg.n_slices,
                value_projection=cfg.slice_value_projection,
                normalize=cfg.slice_normalize,
                **enc_kw,
            )

        shared = encoder() if cfg.share_encoder else None
        self.encoder = shared
        blocks = []
        for l in range(cfg.n_layers):
            dec_kw = enc_kw if cfg.decoder == "separate" else {}
            dec = SliceDecoder(cfg.decoder, D, cfg.slice_heads, cfg.n_slices, n_points=cfg.n_points, **dec_kw)
            mixer = LatentSliceMixer(shared if shared is not None else encoder(), _ssm(cfg, "bi", grid=False), dec, D)
            blocks.append(
                ResidualBlock(
                    D, mixer, cfg.mlp_ratio, cfg.act, out_channels=cfg.out_channels if l == cfg.n_layers - 1 else 0
                )
            )
        self.blocks = nn.ModuleList(blocks)
        if cfg.init in ("auto", "trunc_normal"):
            self._init_weights()

    def forward(
        self,
        x: torch.Tensor,
        pos: torch.Tensor | None = None,
        ctx: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        cfg = self.config
        check_mesh_input(
            "LaMO",
            x,
            pos,
            ctx,
            model=self,
            structured=cfg.structured,
            in_channels=cfg.in_channels,
            pos_channels=cfg.pos_channels,
            ctx_channels=cfg.ctx_channels,
        )
        feats, grid = mesh_features(
            x,
            pos,
            ctx,
            structured=cfg.structured,
            pos_channels=cfg.pos_channels,
            positional_grid=cfg.positional_grid,
            ctx_as_channels=not cfg.time_embedding,
        )
        return self._forward_points(feats, grid, ctx, x, mask)
