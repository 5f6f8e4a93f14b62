"""CHONN backbones (paper 000: Circuit-inspired High-Order Neural Networks), built from the Cascaded Kirchhoff
Block (CKB) of :mod:`neurodyn.nn.kirchhoff`. Four registered models:

``chonn1d`` (Fig. 3), ``x: (B, L, C_in) -> (B, L, C_out)``::

    x -> [circular pad] -> Linear(C_in -> width) -> CKB(orders[0]) -> ... -> CKB(orders[-1]) -> Linear -> [crop]

  ``orders``: ``(n,)`` is CHONN of order n, ``(1,) * n`` the depth-n stack of first-order blocks.

``chonn_unet``: the PDEBench U-Net of ``models/unet.py`` with ``ckb_blocks`` CKBs of ``order`` after each stage
in ``ckb_stages`` (``enc1..enc4``, ``bottleneck``, ``dec4..dec1``; default ``("bottleneck", "dec4")``);
``order = 0`` is exactly the U-Net.

``chonn_fno``: the FNO of ``models/fno.py`` with a cascaded branch in layers ``ckb_layers``; layer l computes
``sigma(K_l v + W_l v)`` and ``ckb_mode="replace_skip"`` makes ``W_l v = v + CKB_branch(v)`` (Navier-Stokes),
``"parallel"`` adds ``CKB_branch(v)`` (shallow water; ``ckb_downsample`` runs it on a pooled map).

``chonn_vision``: a small VMamba-style classifier, ``(B, H, W, C) -> (B, num_classes)``: patch stem, four
stages of ``x += DropPath(CKB_branch(x)); x += DropPath(MLP(LN(x)))``, pooled LayerNorm head.

Choices that matter (each an option; the full paper-vs-code table is in
docs/papers/notes-chonn.md#chonn-models-paper-vs-code):

* ``ssm.combine="mean"`` (ours): every cascade stage starts at gain 1; "sum" (VMamba's) is the presets' paper scale.
* ``scan="auto"``: "bi" on sequences, "cross" on grids (the targets are non-causal).
* ``chonn_unet`` puts the CKBs in the project's U-Net, not the paper's CNO-like backbone (isolates the CKBs).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError, check_choice
from ..nn.kirchhoff import CascadedKirchhoffBlock
from ..nn.ssm_config import KirchhoffSSMConfig
from .fno import FNO, FNOConfig
from .inputs import check_grid_input, check_input
from .registry import register
from .unet import UNet, UNetConfig

__all__ = [
    "CKBOptions",
    "Chonn1DConfig",
    "Chonn1D",
    "ChonnUNetConfig",
    "ChonnUNet",
    "ChonnFNOConfig",
    "ChonnFNO",
    "ChonnVisionConfig",
    "ChonnVision",
    "UNET_STAGES",
]


@dataclass
class CKBOptions:
    """The Cascaded Kirchhoff Block fields shared by the CHONN configs, with the block's own defaults (see
    :class:`neurodyn.nn.kirchhoff.CascadedKirchhoffBlock`); a config redeclares the fields whose default differs
    for its model. One line per field (type, default, meaning):

    Attributes:
        ssm (KirchhoffSSMConfig, d_state 16, expand 1, d_conv 3, zoh, ...): the cells' scan options
            (``neurodyn.nn.ssm_config.KirchhoffSSMConfig``: d_state, expand, d_conv, discretization, dt_rank,
            combine (how a cell's scan directions are merged: mean | sum | norm), selective, coef_norm, backend
            (the scan kernel: auto | triton | torch | cpp | ref)).
        conv_pointwise (bool, True): the DSConv's pointwise 1x1 convolution after the depthwise one.
        scan (str, "bi"): scan directions: uni | bi | cross | auto (cross on 2-D grids, bi on 1-D ones).
        norm (str, "layernorm"): Norm(X) of Eq. 31: layernorm | none.
        out_norm (bool, False): LayerNorm on ybar before the gate (VMamba's).
        cascade_input (str, "prev_output"): what cell r >= 2 reads: prev_output (Eq. 35) | prev_output_plus_input.
        aggregate (str, "sum"): ybar: sum of the stage outputs (Eq. 36) | last.
    """

    ssm: KirchhoffSSMConfig = field(default_factory=KirchhoffSSMConfig)
    conv_pointwise: bool = True
    scan: str = "bi"
    norm: str = "layernorm"
    out_norm: bool = False
    cascade_input: str = "prev_output"
    aggregate: str = "sum"

    def __post_init__(self) -> None:
        check_choice("chonn scan", self.scan, ("uni", "bi", "cross", "auto"))
        check_choice("chonn norm", self.norm, ("layernorm", "none"))
        check_choice("chonn cascade_input", self.cascade_input, ("prev_output", "prev_output_plus_input"))
        check_choice("chonn aggregate", self.aggregate, ("sum", "last"))


def _field_values(cls: type, cfg) -> dict:
    """The values in ``cfg`` of the fields of the dataclass ``cls`` (one of ``cfg``'s bases)."""
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cls)}


def _ckb(cfg: CKBOptions, d_model: int, order: int, dims: int, **extra) -> CascadedKirchhoffBlock:
    kw = _field_values(CKBOptions, cfg)
    ssm = kw.pop("ssm")
    kw.update(
        d_state=ssm.d_state,
        expand=ssm.expand,
        d_conv=ssm.d_conv,
        discretization=ssm.discretization,
        dt_rank=ssm.dt_rank,
        merge=ssm.combine,
        selective=ssm.selective,
        coef_norm=ssm.coef_norm,
        backend=ssm.backend,
    )
    if kw["scan"] == "auto":  # VMamba's four traversals on grids, forward + backward on sequences
        kw["scan"] = "cross" if dims == 2 else "bi"
    kw.update(extra)
    return CascadedKirchhoffBlock(d_model, order=order, dims=dims, **kw)


# ---------------------------------------------------------------------------------------------------
# 1-D chain


@dataclass
class Chonn1DConfig(CKBOptions):
    """``chonn1d``: lift, stacked CKBs of the given ``orders``, projection (module docstring). One line per field
    (type, default, meaning); the CKB fields are :class:`CKBOptions`' (every one of them, with ``ssm.d_state`` 8).

    Attributes:
        in_channels (int, 1): input channels (from the data).
        out_channels (int, 1): output channels (from the data).
        width (int, 16): channels of the chain ("expansion ratio 16", notes A11).
        orders (tuple, (1,)): the order of every stacked block: (n,) CHONN of order n, (1,) * n the depth-n stack.
        ssm (KirchhoffSSMConfig, d_state 8, ...): the cells' scan options (paper: 8 states in 1-D).
        conv_padding_mode (str, "zeros"): the DSConv's padding: zeros | circular (for periodic signals, notes 6.6;
            kept as that option, no preset sets it).
        circular_pad (int, 0): points copied periodically on each side before the chain (cropped after), so that
            the non-periodic scans see a periodic signal's wrap-around (notes 6.6; 0: off, the paper's setting).
    """

    in_channels: int = 1
    out_channels: int = 1
    width: int = 16
    orders: tuple[int, ...] = (1,)
    ssm: KirchhoffSSMConfig = field(default_factory=lambda: KirchhoffSSMConfig(d_state=8))
    conv_padding_mode: str = "zeros"
    circular_pad: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        orders = tuple(int(o) for o in self.orders)
        if not orders or min(orders) < 1:
            raise ConfigError(f"chonn1d orders must be a non-empty list of block orders >= 1; got {self.orders!r}")
        if int(self.circular_pad) < 0:
            raise ConfigError(f"chonn1d circular_pad must be >= 0; got {self.circular_pad!r}")


@register("chonn1d", Chonn1DConfig)
class Chonn1D(nn.Module):
    """``model(x, pos=None, ctx=None)``: ``x (B, L, in_channels)`` -> ``(B, L, out_channels)``."""

    def __init__(self, config: Chonn1DConfig):
        super().__init__()
        orders = tuple(int(o) for o in config.orders)
        self.config = config
        self.lift = nn.Linear(config.in_channels, config.width)
        self.blocks = nn.ModuleList(
            _ckb(config, config.width, o, 1, conv_padding_mode=config.conv_padding_mode) for o in orders
        )
        self.proj = nn.Linear(config.width, config.out_channels)

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor | None = None, ctx: torch.Tensor | None = None
    ) -> torch.Tensor:
        cfg = self.config
        check_grid_input("chonn1d", x, 1, cfg.in_channels, ctx, 0, pos, self)
        p = int(cfg.circular_pad)
        L = x.shape[1]
        if p:
            if p > L:
                raise ValueError(f"chonn1d circular_pad={p} is longer than the sequence ({L} points)")
            x = torch.cat([x[:, L - p :], x, x[:, :p]], dim=1)
        h = self.lift(x)
        for blk in self.blocks:
            h = blk(h)
        y = self.proj(h)
        return y[:, p : p + L] if p else y


# ---------------------------------------------------------------------------------------------------
# U-Net with CKBs

UNET_STAGES = ("enc1", "enc2", "enc3", "enc4", "bottleneck", "dec4", "dec3", "dec2", "dec1")


@dataclass
class ChonnUNetConfig(CKBOptions, UNetConfig):
    """``chonn_unet``: ``UNetConfig`` (every field there) plus the CKBs (module docstring) and :class:`CKBOptions`'
    fields; one line per field of its own (type, default, meaning):

    Attributes:
        order (int, 2): cells per CKB; 0: no CKB, the plain U-Net.
        ckb_stages (tuple, ("bottleneck", "dec4")): the stages followed by CKBs (``UNET_STAGES``).
        ckb_blocks (int, 1): CKBs after each of those stages.
        scan (str, "cross"): the CKBs' scan directions (VMamba's four traversals on the 2-D maps).
    """

    order: int = 2
    ckb_stages: tuple[str, ...] = ("bottleneck", "dec4")
    ckb_blocks: int = 1
    scan: str = "cross"

    def __post_init__(self) -> None:
        UNetConfig.__post_init__(self)
        CKBOptions.__post_init__(self)
        bad = [s for s in self.ckb_stages if s not in UNET_STAGES]
        if bad or len(set(self.ckb_stages)) != len(self.ckb_stages):
            raise ConfigError(
                f"chonn_unet ckb_stages must be distinct names from {', '.join(UNET_STAGES)}; "
                f"got {tuple(self.ckb_stages)!r}"
            )
        if int(self.order) < 0 or int(self.ckb_blocks) < 1:
            raise ConfigError(
                f"chonn_unet needs order >= 0 and ckb_blocks >= 1; got order={self.order!r}, "
                f"ckb_blocks={self.ckb_blocks!r}"
            )


@register("chonn_unet", ChonnUNetConfig)
class ChonnUNet(UNet):
    """PDEBench U-Net with CKBs after the stages ``ckb_stages``; ``model(x, pos=None, ctx=None)``."""

    def __init__(self, config: ChonnUNetConfig):
        super().__init__(UNetConfig(**_field_values(UNetConfig, config)))
        self.config = config
        f = config.init_features
        width = {"bottleneck": 16 * f}
        for k in range(1, 5):
            width[f"enc{k}"] = width[f"dec{k}"] = f * 2 ** (k - 1)
        self.ckbs = nn.ModuleDict()
        if int(config.order) > 0:
            for s in config.ckb_stages:
                self.ckbs[s] = nn.Sequential(
                    *(_ckb(config, width[s], int(config.order), config.dims) for _ in range(int(config.ckb_blocks)))
                )

    @property
    def _input_name(self) -> str:  # order 0 is the plain U-Net, down to its error messages
        return "chonn_unet" if len(self.ckbs) else "UNet"

    def _stage(self, h: torch.Tensor, stage: str) -> torch.Tensor:
        """``UNet.forward``'s hook: the CKBs of ``stage`` on the channels-first map (channels last inside)."""
        if stage not in self.ckbs:
            return h
        return self.ckbs[stage](h.movedim(1, -1)).movedim(-1, 1).contiguous()


# ---------------------------------------------------------------------------------------------------
# FNO with a cascaded evolution branch


@dataclass
class ChonnFNOConfig(CKBOptions, FNOConfig):
    """``chonn_fno``: ``FNOConfig`` (every field there) plus the cascaded branch (module docstring) and
    :class:`CKBOptions`' fields; one line per field of its own (type, default, meaning):

    Attributes:
        order (int, 2): cells per CKB (>= 1).
        ckb_mode (str, "replace_skip"): replace_skip (NS: the CKB replaces W_l) | parallel (SWE: an added branch).
        ckb_layers (tuple, (0,)): the Fourier layers with a CKB branch.
        ckb_downsample (int, 1): the branch runs on the s x s average-pooled map (SWE: 2), upsampled bilinearly.
        scan (str, "auto"): the CKBs' scan directions (auto: cross on 2-D grids, bi on 1-D).
    """

    order: int = 2
    ckb_mode: str = "replace_skip"
    ckb_layers: tuple[int, ...] = (0,)
    ckb_downsample: int = 1
    scan: str = "auto"

    def __post_init__(self) -> None:
        FNOConfig.__post_init__(self)
        CKBOptions.__post_init__(self)
        check_choice("chonn_fno ckb_mode", self.ckb_mode, ("replace_skip", "parallel"))
        layers = tuple(int(l) for l in self.ckb_layers)
        if any(l < 0 or l >= self.n_layers for l in layers) or len(set(layers)) != len(layers):
            raise ConfigError(
                f"chonn_fno ckb_layers must be distinct layer indices in [0, {self.n_layers}); "
                f"got {tuple(self.ckb_layers)!r}"
            )
        if int(self.order) < 1 or int(self.ckb_downsample) < 1:
            raise ConfigError(
                f"chonn_fno needs order >= 1 and ckb_downsample >= 1; got order={self.order!r}, "
                f"ckb_downsample={self.ckb_downsample!r}"
            )


class _PlainSkip(nn.Module):
    """``add + v`` (skip "identity") or ``add`` (skip "none"), with FNO's skip call signature."""

    def __init__(self, identity: bool):
        super().__init__()
        self.identity = identity

    def forward(self, h: torch.Tensor, add: torch.Tensor) -> torch.Tensor:
        return add + h if self.identity else add


class KirchhoffSkip(nn.Module):
    """An FNO layer's pointwise path with a cascaded evolution branch, on channels-first ``(B, w, *spatial)``.

    ``forward(v, add)`` returns ``add + [W v] + [v] + up(CKB_branch(pool(v)))``: ``W v`` when ``linear`` is
    given ("parallel"), ``v`` when ``residual`` ("replace_skip": the CKB's own residual of Eq. 38).
    """

    def __init__(self, ckb: CascadedKirchhoffBlock, linear: nn.Module | None, residual: bool, downsample: int = 1):
        super().__init__()
        self.ckb, self.linear, self.residual, self.downsample = ckb, linear, residual, int(downsample)

    def forward(self, h: torch.Tensor, add: torch.Tensor) -> torch.Tensor:
        out = self.linear(h, add=add) if self.linear is not None else add
        if self.residual:
            out = out + h
        s = self.downsample
        z = h
        if s > 1:
            z = F.avg_pool2d(h, s) if h.dim() == 4 else F.avg_pool1d(h, s)
        z = self.ckb(z.movedim(1, -1), residual=False).movedim(-1, 1)
        if s > 1:
            mode = "bilinear" if h.dim() == 4 else "linear"
            z = F.interpolate(z, size=h.shape[2:], mode=mode, align_corners=False)
        return out + z


@register("chonn_fno", ChonnFNOConfig)
class ChonnFNO(FNO):
    """FNO with CKB branches in the layers ``ckb_layers``; ``model(x, pos=None, ctx=None)`` as ``fno``."""

    def __init__(self, config: ChonnFNOConfig):
        super().__init__(FNOConfig(**_field_values(FNOConfig, config)))
        self.config = config
        layers = tuple(int(l) for l in config.ckb_layers)
        parallel = config.ckb_mode == "parallel"
        skips = []
        for l in range(config.n_layers):
            linear = self.skips[l] if self.skips is not None else None  # FNO's W_l (skip "linear")
            if l not in layers:
                skips.append(linear if linear is not None else _PlainSkip(config.skip == "identity"))
                continue
            ckb = _ckb(config, config.width, int(config.order), self.n_spatial)
            # replace_skip: v + CKB_branch(v) instead of W_l v; parallel: W_l v (or v, or nothing) + CKB_branch(v)
            skips.append(
                KirchhoffSkip(
                    ckb,
                    linear if parallel else None,
                    residual=not parallel or config.skip == "identity",
                    downsample=config.ckb_downsample,
                )
            )
        self.skips = nn.ModuleList(skips)


# ---------------------------------------------------------------------------------------------------
# vision backbone


@dataclass
class ChonnVisionConfig(CKBOptions):
    """``chonn_vision`` (module docstring): :class:`CKBOptions`' fields with VMamba's defaults redeclared, one line
    per field of its own or redeclared (type, default, meaning):

    Attributes:
        in_channels (int, 3): image channels.
        num_classes (int, 1000): classes.
        patch_size (int, 4): total stride of the stem: 1 | 2 | 4.
        dims (tuple, (96, 192, 384, 768)): width of each stage (the paper's Tiny).
        depths (tuple, (2, 2, 6, 2)): blocks per stage (the paper's Tiny).
        order (int, 2): cells per CKB ("two cells per CKB").
        mlp_ratio (float, 4.0): hidden width of each block's MLP, as a multiple of the stage width.
        drop_path (float, 0.2): the stochastic-depth rate of the last block (linear from 0).
        ssm (KirchhoffSSMConfig, d_state 1, ...): the cells' scan options (d_state 1: VMamba v2's; not given).
        conv_pointwise (bool, False): "lightweight depthwise conv" (no pointwise 1x1).
        scan (str, "cross"): VMamba's four traversals.
        out_norm (bool, True): VMamba's LayerNorm on ybar before the gate.
        cascade_input (str, "prev_output_plus_input"): the ImageNet text: cell r >= 2 reads u + y_{r-1}.
    """

    in_channels: int = 3
    num_classes: int = 1000
    patch_size: int = 4
    dims: tuple[int, ...] = (96, 192, 384, 768)
    depths: tuple[int, ...] = (2, 2, 6, 2)
    order: int = 2
    mlp_ratio: float = 4.0
    drop_path: float = 0.2
    ssm: KirchhoffSSMConfig = field(default_factory=lambda: KirchhoffSSMConfig(d_state=1))
    conv_pointwise: bool = False
    scan: str = "cross"
    out_norm: bool = True
    cascade_input: str = "prev_output_plus_input"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("chonn_vision patch_size", self.patch_size, (1, 2, 4))
        if len(self.dims) != len(self.depths) or not self.dims or min(self.depths) < 0:
            raise ConfigError(
                f"chonn_vision dims and depths need one entry per stage; got dims={self.dims!r}, depths={self.depths!r}"
            )


class DropPath(nn.Module):
    """Stochastic depth per sample (identity in eval mode or with ``p = 0``)."""

    def __init__(self, p: float = 0.0):
        super().__init__()
        self.p = float(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.dim() - 1)).bernoulli_(keep)
        return x * mask / keep


class _ChannelNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of a channels-first map."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.movedim(1, -1)).movedim(-1, 1)


class _VisionBlock(nn.Module):
    def __init__(self, cfg: ChonnVisionConfig, dim: int, drop: float):
        super().__init__()
        self.ckb = _ckb(cfg, dim, int(cfg.order), 2)
        hidden = int(round(cfg.mlp_ratio * dim))
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)) if hidden else None
        self.drop = DropPath(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.ckb(x, residual=False))
        if self.mlp is not None:
            x = x + self.drop(self.mlp(self.norm(x)))
        return x


@register("chonn_vision", ChonnVisionConfig)
class ChonnVision(nn.Module):
    """``model(x, pos=None, ctx=None)``: images ``(B, H, W, in_channels)`` -> logits ``(B, num_classes)``."""

    def __init__(self, config: ChonnVisionConfig):
        super().__init__()
        self.config = config
        d0 = config.dims[0]
        s1, s2 = {1: (1, 1), 2: (2, 1), 4: (2, 2)}[config.patch_size]
        self.stem = nn.Sequential(
            nn.Conv2d(config.in_channels, max(1, d0 // 2), 3, stride=s1, padding=1),
            _ChannelNorm2d(max(1, d0 // 2)),
            nn.GELU(),
            nn.Conv2d(max(1, d0 // 2), d0, 3, stride=s2, padding=1),
            _ChannelNorm2d(d0),
        )
        total = sum(config.depths)
        rates = torch.linspace(0, config.drop_path, max(total, 1)).tolist()
        self.stages = nn.ModuleList()
        self.downs = nn.ModuleList()
        k = 0
        for i, (dim, depth) in enumerate(zip(config.dims, config.depths)):
            if i > 0:
                self.downs.append(
                    nn.Sequential(nn.Conv2d(config.dims[i - 1], dim, 3, stride=2, padding=1), _ChannelNorm2d(dim))
                )
            self.stages.append(nn.Sequential(*(_VisionBlock(config, dim, rates[k + j]) for j in range(depth))))
            k += depth
        self.head_norm = nn.LayerNorm(config.dims[-1])
        self.head = nn.Linear(config.dims[-1], config.num_classes)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, H, W, C)`` -> pooled features ``(B, dims[-1])``."""
        h = self.stem(x.movedim(-1, 1))
        for i, stage in enumerate(self.stages):
            if i > 0:
                h = self.downs[i - 1](h)
            h = stage(h.movedim(1, -1)).movedim(-1, 1)
        return self.head_norm(h.mean(dim=(2, 3)))

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor | None = None, ctx: torch.Tensor | None = None
    ) -> torch.Tensor:
        c = self.config.in_channels
        check_input("chonn_vision", x, self, f"images (batch, H, W, {c}), channels last", (4,), c)
        if pos is not None or ctx is not None:
            raise ValueError("chonn_vision takes images only (pos=None, ctx=None)")
        return self.head(self.forward_features(x))
