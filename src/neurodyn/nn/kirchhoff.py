"""Kirchhoff Neural Cell (KNC) and Cascaded Kirchhoff Block (CKB) of CHONN (paper 000, Methods Eqs. 29-47).

Cell: an RC node ``dv/dt = -alpha v + beta u`` (Eqs. 15-18), zero-order hold, input-dependent (Eqs. 32-34).
For channel ``i`` of ``D``, state ``n`` of ``N = d_state`` and scan position ``k``::

    Delta_k[i]   = softplus((W_Delta u_k)[i] + b_Delta[i]),   b_k = W_b u_k,  c_k = W_c u_k      (Eq. 33)
    alpha_k[i,n] = exp(-Delta_k[i] lambda[i,n]),  beta_k[i,n] = (1 - alpha_k[i,n]) / lambda[i,n] * b_k[n] (Eq. 34)
    v_k[i,n]     = alpha_k[i,n] v_{k-1}[i,n] + beta_k[i,n] u_k[i]
    y_k[i]       = sum_n c_k[n] v_k[i,n] + d[i] u_k[i]                                           (Eq. 32)

``lambda = exp(log_lambda) > 0``. On ``ops.selective_scan`` (Euler input ``dt B u``) the exact ZOH is
``B_eff[b, i, n, t] = b_t[n] phi(Delta_t[i] lambda[i, n])``, ``phi(x) = (1 - e^-x) / x``, in the per-channel group
layout ``(batch, D, N, L)``; ``discretization="euler"`` drops ``phi``.

Block, ``X: (B, *spatial, d_model)`` with 1 or 2 spatial axes::

    u = SiLU(DSConv(W_u Norm(X))),  g = SiLU(W_g Norm(X))          (Eq. 31)
    y_1 = K_1(u),  y_r = K_r(y_{r-1}),  r = 2..order               (Eq. 35)
    Y = X + W_o(sum_r y_r * g)                                     (Eqs. 36-38)

Choices that matter (each an option of :class:`CascadedKirchhoffBlock`; the measurements behind them and the
full list are in docs/papers/notes-chonn.md#kirchhoff-cell-and-block-paper-vs-code):

* ``scan``: "uni", "bi" (forward + reversed, own parameters) or "cross" (VMamba's four traversals); all
  directions of a cell run as one ``selective_scan`` call with ``K * D`` channels.
* ``merge="mean"``: the directions are averaged after every cell (unit gain per stage; "sum", "norm": options).
* ``coef_norm="none"``: Eq. 33 as written; "cascade" feeds cells 2..n's coefficients ``u / rms(u)`` (Poisson).
* Initialisation (Mamba / S4D-real): ``lambda[i, n] = n + 1``, ``d = 1``, ``softplus(b_Delta)`` in [1e-3, 1e-1].

Parameter count of one block: :func:`ckb_parameter_count`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError, check_choice
from ..ops.knc_scan import knc_scan, merge_sequences, n_directions, scan_sequences
from .init import inv_softplus
from .ssm_config import KirchhoffSSMConfig

Tensor = torch.Tensor

__all__ = ["KirchhoffCell", "DSConv", "CascadedKirchhoffBlock", "ckb_parameter_count"]

_DISCRETIZATIONS = ("zoh", "euler")
COEF_NORMS = ("none", "rms")  # a cell's; the block's ("cascade" too) are validated by KirchhoffSSMConfig
_COEF_EPS = 1e-6

# ---------------------------------------------------------------------------------------------------
# the cell (the scan itself, its reference and the layouts: neurodyn.ops.knc_scan)


class KirchhoffCell(nn.Module):
    """One Kirchhoff Neural Cell with ``directions`` traversals (module docstring, Eqs. 32-34).

    ``forward(u)`` with ``u: (batch, K, D, L)`` (the traversals of :func:`scan_sequences`) returns the
    per-direction outputs ``(batch, K, D, L)``; :func:`merge_sequences` sums them on the grid.

    Parameters per direction ``k`` (selective): ``x_proj (K, R + 2N, D)`` (rows: ``W_Delta`` low rank, then
    ``W_b``, ``W_c``), ``dt_proj_weight (K, D, R)``, ``dt_bias (K, D)`` (= ``b_Delta``), ``log_lambda (K, D, N)``,
    ``d (K, D)``. Time-invariant (``selective=False``): ``dt_bias (K, D)``, ``b (K, D, N)``, ``c (K, D, N)``,
    ``log_lambda``, ``d``.
    """

    def __init__(
        self,
        d_inner: int,
        d_state: int = 16,
        directions: int = 1,
        dt_rank: int = 1,
        selective: bool = True,
        discretization: str = "zoh",
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        dt_init_floor: float = 1e-4,
        backend: str = "auto",
        coef_norm: str = "none",
    ):
        super().__init__()
        check_choice("KirchhoffCell discretization", discretization, _DISCRETIZATIONS)
        check_choice("KirchhoffCell coef_norm", coef_norm, COEF_NORMS)
        if min(d_inner, d_state, directions, dt_rank) < 1:
            raise ConfigError(
                f"KirchhoffCell sizes must be >= 1; got d_inner={d_inner}, d_state={d_state}, "
                f"directions={directions}, dt_rank={dt_rank}"
            )
        if not 0 < dt_min <= dt_max:
            raise ConfigError(f"KirchhoffCell needs 0 < dt_min <= dt_max; got {dt_min}, {dt_max}")
        K, D, N, R = directions, d_inner, d_state, dt_rank
        self.d_inner, self.d_state, self.directions, self.dt_rank = D, N, K, R
        self.selective, self.discretization, self.backend = selective, discretization, backend
        self.coef_norm = coef_norm
        # S4D-real: lambda[i, n] = n + 1
        self.log_lambda = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(K, D, 1))
        self.d = nn.Parameter(torch.ones(K, D))
        self.log_lambda._no_weight_decay = True
        self.d._no_weight_decay = True
        dt = torch.exp(torch.rand(K, D) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.dt_bias = nn.Parameter(inv_softplus(dt.clamp_min(dt_init_floor)))
        if selective:
            bound = D**-0.5  # nn.Linear's default for x_proj (fan_in = D)
            self.x_proj = nn.Parameter(torch.empty(K, R + 2 * N, D).uniform_(-bound, bound))
            self.dt_proj_weight = nn.Parameter(torch.empty(K, D, R).uniform_(-(R**-0.5), R**-0.5))
        else:
            self.b = nn.Parameter(torch.ones(K, D, N))
            self.c = nn.Parameter(torch.randn(K, D, N) * N**-0.5)

    def extra_repr(self) -> str:
        return (
            f"d_inner={self.d_inner}, d_state={self.d_state}, directions={self.directions}, "
            f"dt_rank={self.dt_rank}, selective={self.selective}, discretization={self.discretization!r}, "
            f"coef_norm={self.coef_norm!r}"
        )

    @property
    def lam(self) -> Tensor:
        """Decay rates ``lambda = exp(log_lambda) > 0``, ``(K, D, N)``."""
        return self.log_lambda.exp()

    def coefficients(self, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(Delta (batch, K, D, L), b (batch, K, N, L), c (batch, K, N, L))`` for ``u: (batch, K, D, L)``."""
        if not self.selective:
            raise RuntimeError("a time-invariant KirchhoffCell has fixed coefficients (dt_bias, b, c)")
        if self.coef_norm == "rms":  # scale-free coefficients: the cell is homogeneous of degree 1 in u
            u = u * torch.rsqrt(u.square().mean(dim=2, keepdim=True) + _COEF_EPS)
        xdbl = torch.einsum("bkdl,ked->bkel", u, self.x_proj)
        low, b, c = xdbl.split([self.dt_rank, self.d_state, self.d_state], dim=2)
        pre = torch.einsum("bkrl,kdr->bkdl", low, self.dt_proj_weight) + self.dt_bias[None, :, :, None]
        return F.softplus(pre), b, c

    def forward(self, u: Tensor) -> Tensor:
        if u.dim() != 4 or u.shape[1] != self.directions or u.shape[2] != self.d_inner:
            raise ValueError(
                f"KirchhoffCell input has shape {tuple(u.shape)}; expected (batch, K={self.directions}, "
                f"D={self.d_inner}, L)"
            )
        batch, K, D, L = u.shape
        lam = self.lam.reshape(K * D, self.d_state)
        flat = u.reshape(batch, K * D, L)
        d = self.d.reshape(K * D)
        if self.selective:
            delta, b, c = self.coefficients(u)
            y = knc_scan(flat, delta.reshape(batch, K * D, L), lam, b, c, d, self.discretization, backend=self.backend)
        else:
            y = knc_scan(
                flat,
                F.softplus(self.dt_bias).reshape(K * D),
                lam,
                self.b.reshape(K * D, -1),
                self.c.reshape(K * D, -1),
                d,
                self.discretization,
                backend=self.backend,
            )
        return y.reshape(batch, K, D, L)


# ---------------------------------------------------------------------------------------------------
# the block


class DSConv(nn.Module):
    """Depthwise(-separable) convolution on channels-first ``(batch, D, *spatial)``, ``same`` padding.

    Depthwise ``Conv{dims}d(D, D, kernel, groups=D)`` with bias, then (``pointwise``) ``Conv{dims}d(D, D, 1)``.
    """

    def __init__(
        self, channels: int, kernel_size: int = 3, dims: int = 1, pointwise: bool = True, padding_mode: str = "zeros"
    ):
        super().__init__()
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ConfigError(f"DSConv kernel_size must be odd and >= 1 (same padding); got {kernel_size}")
        conv = {1: nn.Conv1d, 2: nn.Conv2d}[dims]
        self.depthwise = conv(
            channels, channels, kernel_size, padding=kernel_size // 2, groups=channels, padding_mode=padding_mode
        )
        self.pointwise = conv(channels, channels, 1) if pointwise else None

    def forward(self, x: Tensor) -> Tensor:
        x = self.depthwise(x)
        return self.pointwise(x) if self.pointwise is not None else x


def _resolve_dt_rank(dt_rank, d_model: int) -> int:
    if dt_rank in ("auto", None):
        return max(1, math.ceil(d_model / 16))
    return int(dt_rank)


class CascadedKirchhoffBlock(nn.Module):
    """Cascaded Kirchhoff Block (module docstring, Eqs. 31, 35-38): ``(B, *spatial, d_model)`` -> same shape.

    Args:
        d_model: channels of the block input and output.
        order: number ``N >= 1`` of serial Kirchhoff cells (the "order" of the block).
        d_state: states per channel of each cell.
        dims: spatial axes (1: sequences ``(B, L, d)``, 2: grids ``(B, H, W, d)``).
        expand: inner width ``D = round(expand * d_model)``.
        d_conv, conv_pointwise, conv_padding_mode: the DSConv.
        scan: "uni" | "bi" | "cross" (module docstring).
        norm: "layernorm" | "none".
        out_proj: "auto" | True | False; out_norm: LayerNorm on ``ybar`` before the gate.
        cascade_input: "prev_output" (Eq. 35) | "prev_output_plus_input".
        aggregate: "sum" (Eq. 36) | "last".
        selective, discretization, dt_rank, dt_min, dt_max: the cells.
        merge: how every cell's ``K`` scan directions are combined: "mean" (default; unit gain per stage) |
            "sum" (the old block, gain ``K`` per stage) | "norm" (LayerNorm after every merge; module docstring).
        coef_norm: where ``Delta, b, c`` come from: "none" (Eq. 33, default) | "cascade" (cells 2..N from their
            RMS-normalised input) | "rms" (every cell); module docstring.
        residual: add ``X`` (Eq. 38); ``forward(x, residual=False)`` also returns the branch alone.
    """

    def __init__(
        self,
        d_model: int,
        order: int = 2,
        d_state: int = 16,
        dims: int = 1,
        expand: float = 1.0,
        d_conv: int = 3,
        conv_pointwise: bool = True,
        conv_padding_mode: str = "zeros",
        scan: str = "bi",
        norm: str = "layernorm",
        out_proj="auto",
        out_norm: bool = False,
        cascade_input: str = "prev_output",
        aggregate: str = "sum",
        selective: bool = True,
        discretization: str = "zoh",
        dt_rank="auto",
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        residual: bool = True,
        backend: str = "auto",
        merge: str = "mean",
        coef_norm: str = "none",
    ):
        super().__init__()
        if int(order) < 1:
            raise ConfigError(
                f"CascadedKirchhoffBlock order must be >= 1 (order 0 is the backbone without the block); got {order!r}"
            )
        check_choice("CascadedKirchhoffBlock dims", dims, (1, 2))
        check_choice("CascadedKirchhoffBlock norm", norm, ("layernorm", "none"))
        check_choice("CascadedKirchhoffBlock cascade_input", cascade_input, ("prev_output", "prev_output_plus_input"))
        check_choice("CascadedKirchhoffBlock aggregate", aggregate, ("sum", "last"))
        # the cells' scan options are validated where a model's ssm section is (neurodyn.nn.ssm_config)
        KirchhoffSSMConfig(
            d_state=d_state,
            expand=expand,
            d_conv=d_conv,
            discretization=discretization,
            dt_rank=dt_rank,
            combine=merge,
            selective=selective,
            coef_norm=coef_norm,
            backend=backend,
        )
        D = int(round(expand * d_model))
        if D < 1:
            raise ConfigError(f"CascadedKirchhoffBlock expand={expand} gives no inner channels for d_model={d_model}")
        K = n_directions(scan, dims)
        use_out = (D != d_model) if out_proj == "auto" else bool(out_proj)
        if not use_out and D != d_model:
            raise ConfigError(
                f"CascadedKirchhoffBlock out_proj=False needs expand=1 (inner width {D} != d_model {d_model})"
            )
        self.d_model, self.d_inner, self.order, self.dims, self.scan = d_model, D, int(order), dims, scan
        self.cascade_input, self.aggregate, self.residual = cascade_input, aggregate, residual
        self.merge, self.n_dirs = merge, K
        self.dt_rank = _resolve_dt_rank(dt_rank, d_model)
        self.norm = nn.LayerNorm(d_model) if norm == "layernorm" else nn.Identity()
        self.in_proj = nn.Linear(d_model, 2 * D, bias=False)  # [W_u; W_g]
        self.conv = DSConv(D, d_conv, dims, conv_pointwise, conv_padding_mode)
        self.cells = nn.ModuleList(
            KirchhoffCell(
                D,
                d_state,
                K,
                self.dt_rank,
                selective,
                discretization,
                dt_min,
                dt_max,
                backend=backend,
                coef_norm="rms" if coef_norm == "rms" or (coef_norm == "cascade" and r > 0) else "none",
            )
            for r in range(self.order)
        )
        # merge="norm": a LayerNorm over the D channels after every cell's direction merge
        self.merge_norms = nn.ModuleList(nn.LayerNorm(D) for _ in range(self.order)) if merge == "norm" else None
        self.out_norm = nn.LayerNorm(D) if out_norm else nn.Identity()
        self.out_proj = nn.Linear(D, d_model, bias=False) if use_out else nn.Identity()

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, d_inner={self.d_inner}, order={self.order}, dims={self.dims}, "
            f"scan={self.scan!r}, cascade_input={self.cascade_input!r}, aggregate={self.aggregate!r}"
        )

    def _merge(self, y: Tensor, spatial: tuple[int, ...], r: int) -> Tensor:
        """Cell ``r``'s per-direction outputs ``(B, K, D, L)`` -> ``(B, D, *spatial)`` under ``self.merge``."""
        out = merge_sequences(y, spatial, self.scan)
        if self.merge == "mean":
            return out / self.n_dirs if self.n_dirs > 1 else out
        if self.merge == "norm":
            return self.merge_norms[r](out.movedim(1, -1)).movedim(-1, 1)
        return out  # "sum"

    def stages(self, u: Tensor) -> list[Tensor]:
        """Every stage output ``y_1 .. y_N`` (Eq. 35) on channels-first ``u: (B, D, *spatial)``."""
        spatial = tuple(u.shape[2:])
        y, outs = u, []
        for r, cell in enumerate(self.cells):
            inp = y if (r == 0 or self.cascade_input == "prev_output") else u + y
            y = self._merge(cell(scan_sequences(inp, self.scan)), spatial, r)
            outs.append(y)
        return outs

    def cascade(self, u: Tensor) -> Tensor:
        """Eqs. (35)-(36) on channels-first ``u: (B, D, *spatial)``: ``ybar`` of the same shape."""
        outs = self.stages(u)
        if self.aggregate == "last":
            return outs[-1]
        total = outs[0]
        for y in outs[1:]:
            total = total + y
        return total

    def drive(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Eq. (31) on channels-last ``x``: the cascade's input ``u`` channels-first ``(B, D, *spatial)`` and
        the gate ``g`` before its SiLU, channels-last ``(B, *spatial, D)``."""
        u, g = self.in_proj(self.norm(x)).chunk(2, dim=-1)
        return F.silu(self.conv(u.movedim(-1, 1))), g

    def forward(self, x: Tensor, residual: bool | None = None) -> Tensor:
        if x.dim() != self.dims + 2 or x.shape[-1] != self.d_model:
            axes = "L" if self.dims == 1 else "H, W"
            raise ValueError(
                f"CascadedKirchhoffBlock input has shape {tuple(x.shape)}; expected (batch, {axes}, "
                f"{self.d_model}) (channels last)"
            )
        u, g = self.drive(x)
        ybar = self.cascade(u).movedim(1, -1)
        out = self.out_proj(self.out_norm(ybar) * F.silu(g))
        use_res = self.residual if residual is None else residual
        return x + out if use_res else out


def ckb_parameter_count(
    d_model: int,
    order: int,
    d_state: int = 16,
    dims: int = 1,
    expand: float = 1.0,
    d_conv: int = 3,
    conv_pointwise: bool = True,
    scan: str = "bi",
    norm: str = "layernorm",
    out_proj="auto",
    out_norm: bool = False,
    selective: bool = True,
    dt_rank="auto",
    merge: str = "mean",
) -> int:
    """Closed-form parameter count of :class:`CascadedKirchhoffBlock` (``m = d_model``, ``D`` inner, ``N`` states,
    ``R = dt_rank``, ``K`` directions, ``s`` spatial axes, ``k = d_conv``; selective cells)::

        2m (norm) + 2mD (in_proj) + D k^s + D (depthwise) + [D^2 + D (pointwise)] + [2D (out_norm)]
        + [D m (out_proj)] + order * K * (D (R + 2N) + R D + D + D N + D) + [order * 2D (merge="norm")]
    """
    m, D, N = d_model, int(round(expand * d_model)), d_state
    R, K = _resolve_dt_rank(dt_rank, d_model), n_directions(scan, dims)
    total = (2 * m if norm == "layernorm" else 0) + 2 * m * D + D * d_conv**dims + D
    total += (D * D + D) if conv_pointwise else 0
    total += 2 * D if out_norm else 0
    total += D * m if ((D != m) if out_proj == "auto" else bool(out_proj)) else 0
    cell = (D * (R + 2 * N) + R * D + D + D * N + D) if selective else (D + 2 * D * N + D * N + D)
    return total + order * K * cell + (order * 2 * D if merge == "norm" else 0)
