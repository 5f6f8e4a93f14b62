"""GeoMamba kernel and GeoMamba-SSM (GeoMaNO, Han, Zhang et al. 2025, Sec. 4.2-4.3, Algorithm 1, Eqs. 9-10).

``GeoMambaKernel`` maps a token grid ``z: (B, H, W, D)`` to ``(B, H, W, D)`` (Algorithm 1)::

    x, g = in_proj(z);  x = act(DWConv(x))               # lines 4-5 (split gate, or one shared Z)
    x_d  = Traverse_d(x), d = 1..K                       # four-way cross-scan
    y_d  = GeoMamba-SSM(x_d, dt_d, A_d, B_d, C_d, R_d, D_d)
    y    = CrossMerge(y_d);  out = out_proj(act(LN(y)) * act(g))     # line 13 (norm_act=False: LN(y) * act(g))

GeoMamba-SSM, ``Abar_s = exp(dt A_s)``, ``Bbar_s = dt B_s``: ``ssm="1d"`` (Eq. 9) over the flattened traversal::

    h_s[t] = Abar_s[t] h_s[t-1] + Bbar_s[t] x[t],   y[t] = sum_s C_s[t] (h_s[t] - R_s Bbar_s[t] x[t]) + D x[t]

``ssm="2d"`` (Eq. 10): a row scan then a column scan (weight ``Abar^(|i-i'| + |j-j'|)``), same correction.
1-D runs on ``ops.selective_scan`` with the correction in closed form outside the scan; 2-D on
``ops.selective_scan_2d``. R removes the token's own ``Bbar x``, counted once per merged direction.

Choices that matter (each an option; the layer's defaults differ from the model's in ``correction_form`` and
``gate``; the full list is in docs/papers/notes-geomano.md#geomamba-kernel-paper-vs-code):

* ``correction`` ("none" / "fixed" ``r_pattern`` / "learnable"), ``r_order``, ``correction_form``
  ("cbx" here, "eq9" the paper's, "alg2").
* ``d_mode``, ``directions`` ("paper", "vmamba", "corners"), ``merge`` ("sum" / "mean"), ``gate``, ``norm_act``.
* Initialisation (Mamba): ``A_log = log(1..N)``, D = 1, ``softplus(dt_bias)`` log-uniform in ``dt_range``.

Parameters per kernel (K directions, ``di = expand * D``, r = dt_rank, N = d_state, k = d_conv; split gate)::

    2 D di + (di k^2 + di) + K (r + 2N) di + K (r di + di) + K di N + K di [+ K di N learnable R] + 2 di + di D
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError, check_choice
from ..ops import (
    PAPER_ORDER,
    VMAMBA_ORDER,
    cross_scan,
    cross_unscan,
    resolve_directions,
    selective_scan,
    selective_scan_2d,
)
from ..ops.scan_2d import selective_scan_2d_ref
from .init import inv_softplus
from .ssm_config import R_ORDERS, GeoMambaSSMConfig

__all__ = ["GeoMambaKernel", "resolve_kernel_directions", "pattern_vector", "CORNERS", "R_ORDERS"]

CORNERS = ("tl", "tr", "bl", "br")
DIRECTION_SETS = {"paper": tuple(PAPER_ORDER), "vmamba": tuple(VMAMBA_ORDER), "corners": CORNERS}
_ACTS = {"silu": nn.SiLU, "gelu": nn.GELU}
_NAMES_2D = set(PAPER_ORDER) | set(CORNERS)


def resolve_kernel_directions(directions: str | Sequence[str], ssm: str) -> tuple[str, ...]:
    """Direction names for ``directions`` ("paper" / "vmamba" / "corners" / a tuple) and ``ssm`` ("1d" / "2d")."""
    dirs = resolve_directions(
        directions,
        _NAMES_2D,
        DIRECTION_SETS,
        single=False,
        distinct=True,
        what="GeoMamba directions",
        error=ConfigError,
    )
    if ssm != "2d" and any(d in CORNERS for d in dirs):
        raise ConfigError(
            f"GeoMamba directions {dirs!r}: corner scans (tl, tr, bl, br) exist only for ssm='2d': "
            "a 1-D raster scan and its reverse already reach every token."
        )
    return dirs


def pattern_vector(pattern: str, directions: Sequence[str], r_order: str = "paper") -> list[float]:
    """Per-direction 0/1 correction of a pattern such as ``"0011"``, in the order of ``directions``.

    ``r_order="paper"``: digit k names the k-th of (row, row_rev, col, col_rev); ``"vmamba"``: of (row,
    col, row_rev, col_rev); ``"directions"``: the k-th entry of ``directions``. Corner directions always
    read the digits in (tl, tr, bl, br) order unless ``r_order="directions"``.
    """
    if not isinstance(pattern, str):
        raise ConfigError(
            f"r_pattern must be a string of 0/1 digits such as '0011', got the number {pattern!r}: quote "
            f"it (YAML and command-line overrides read 0011 as the octal number 9; write "
            f"model.ssm.r_pattern=\"'0011'\")."
        )
    if not pattern or set(pattern) - {"0", "1"}:
        raise ConfigError(f"r_pattern {pattern!r} must be a string of 0/1 digits, one per scan direction.")
    check_choice("r_order", r_order, R_ORDERS)
    directions = tuple(directions)
    if r_order == "directions":
        order = directions
    elif all(d in CORNERS for d in directions):
        order = CORNERS
    else:
        order = DIRECTION_SETS[r_order]
    if len(pattern) != len(order):
        raise ConfigError(
            f"r_pattern {pattern!r} has {len(pattern)} digits but r_order={r_order!r} names "
            f"{len(order)} directions {order}."
        )
    missing = [d for d in directions if d not in order]
    if missing:
        raise ConfigError(f"r_order={r_order!r} does not name the direction(s) {missing}; use r_order='directions'.")
    digit = dict(zip(order, pattern))
    return [float(digit[d]) for d in directions]


class GeoMambaKernel(nn.Module):
    """GeoMamba kernel (Algorithm 1): token grid ``(B, H, W, d_model) -> (B, H, W, d_model)``.

    See the module docstring for the equations and options. ``scan_backend``: ``"auto"`` (the Triton kernels for
    CUDA tensors when ``triton`` imports, the fused CPU kernels for CPU tensors, else chunked PyTorch),
    ``"triton"`` (CUDA, or CPU under ``TRITON_INTERPRET=1``), ``"torch"``, ``"cpp"`` or ``"ref"`` (the sequential
    oracles ``selective_scan_ref`` / ``selective_scan_2d_ref``; slow, for tests).
    """

    def __init__(
        self,
        d_model: int,
        d_state: int = 16,
        expand: float = 1.0,
        d_conv: int = 3,
        dt_rank: int = 0,
        ssm: str = "1d",
        directions: str | Sequence[str] = "paper",
        correction: str = "fixed",
        r_pattern: str = "0011",
        r_order: str = "paper",
        r_init: str = "zeros",
        correction_form: str = "cbx",
        d_mode: str = "channel",
        merge: str = "sum",
        gate: str = "split",
        norm_act: bool = True,
        act: str = "silu",
        bias: bool = False,
        conv_bias: bool = True,
        dt_range: Sequence[float] = (1e-3, 1e-1),
        dt_floor: float = 1e-4,
        scan_backend: str = "auto",
    ):
        super().__init__()
        # the options are validated where a model's ssm section is (neurodyn.nn.ssm_config)
        GeoMambaSSMConfig(
            d_state=d_state,
            expand=expand,
            d_conv=d_conv,
            kind=ssm,
            dt_rank=dt_rank,
            d_mode=d_mode,
            combine=merge,
            gate=gate,
            norm_act=norm_act,
            act=act,
            correction=correction,
            r_pattern=r_pattern,
            r_order=r_order,
            r_init=r_init,
            correction_form=correction_form,
            dt_range=tuple(dt_range),
            backend=scan_backend,
        )
        self.d_model, self.d_state = int(d_model), int(d_state)
        self.d_inner = di = int(round(expand * d_model))
        self.dt_rank = r = int(dt_rank) if dt_rank else math.ceil(self.d_model / 16)
        if min(self.d_model, di, self.d_state, r) < 1:
            raise ConfigError(
                f"GeoMamba needs d_model, d_inner = expand * d_model, d_state and dt_rank >= 1; got "
                f"{self.d_model}, {di}, {self.d_state}, {r}."
            )
        self.ssm = ssm
        self.directions = resolve_kernel_directions(directions, ssm)
        self.K = K = len(self.directions)
        N = self.d_state
        self.correction, self.correction_form, self.d_mode = correction, correction_form, d_mode
        self.merge, self.gate, self.norm_act, self.scan_backend = merge, gate, bool(norm_act), scan_backend
        self.r_pattern, self.r_order = r_pattern, r_order

        self.in_proj = nn.Linear(self.d_model, di if gate == "shared" else 2 * di, bias=bias)
        self.conv = nn.Conv2d(di, di, d_conv, padding=d_conv // 2, groups=di, bias=conv_bias) if d_conv > 1 else None
        self.act = _ACTS[act]()
        bound = 1.0 / math.sqrt(di)
        self.x_proj_weight = nn.Parameter(torch.empty(K, r + 2 * N, di).uniform_(-bound, bound))
        self.dt_proj_weight = nn.Parameter(torch.empty(K, di, r).uniform_(-(r**-0.5), r**-0.5))
        lo, hi = (float(v) for v in dt_range)
        dt = torch.exp(torch.empty(K, di).uniform_(math.log(lo), math.log(hi))).clamp_min(dt_floor)
        self.dt_proj_bias = nn.Parameter(inv_softplus(dt))
        self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(K, di, 1))
        if d_mode == "channel":
            self.D = nn.Parameter(torch.ones(K, di))
        elif d_mode == "state":
            self.D = nn.Parameter(torch.full((K, N), 1.0 / N))  # sum_s D_s = 1 per direction, like D = 1
        else:
            self.D = None

        # geometric correction R: (K, di, N)
        if correction == "fixed":
            vec = torch.tensor(pattern_vector(r_pattern, self.directions, r_order))
            self.register_buffer("R_fixed", vec.view(K, 1, 1).expand(K, di, N).clone(), persistent=False)
            self.R = None
        elif correction == "learnable":
            init = (
                torch.tensor(pattern_vector(r_pattern, self.directions, r_order))
                if r_init == "pattern"
                else torch.zeros(K)
            )
            self.R = nn.Parameter(init.view(K, 1, 1).expand(K, di, N).clone())
            self.R_fixed = None
        else:
            self.R = self.R_fixed = None

        self.out_norm = nn.LayerNorm(di)
        self.out_proj = nn.Linear(di, self.d_model, bias=bias)

    def extra_repr(self) -> str:
        corr = self.correction + (f" {self.r_pattern} ({self.r_order} order)" if self.correction == "fixed" else "")
        return (
            f"d_model={self.d_model}, d_inner={self.d_inner}, d_state={self.d_state}, ssm={self.ssm!r}, "
            f"directions={self.directions}, correction={corr}, form={self.correction_form!r}, "
            f"d_mode={self.d_mode!r}, merge={self.merge!r}"
        )

    # ------------------------------------------------------------------------------------------------
    # pieces (public so that tests and benchmarks can probe the SSM inside the kernel)

    def r_tensor(self) -> torch.Tensor | None:
        """The correction ``R`` as ``(K, d_inner, d_state)`` (None when ``correction="none"``)."""
        return self.R if self.R is not None else self.R_fixed

    def d_tensor(self) -> torch.Tensor | None:
        """The skip coefficient as ``(K, d_inner)`` (``d_mode="state"``: ``sum_s D_s`` broadcast)."""
        if self.D is None:
            return None
        if self.d_mode == "state":
            return self.D.sum(-1, keepdim=True).expand(self.K, self.d_inner)
        return self.D

    def A(self) -> torch.Tensor:
        """``(K, d_inner, d_state)`` continuous-time state matrix ``-exp(A_log)`` (negative)."""
        return -torch.exp(self.A_log)

    def branch(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Lines 4-5: ``(B, H, W, D) -> (scan input act(conv(x)), gate input)``, both ``(B, H, W, di)``."""
        proj = self.in_proj(z)
        if self.gate == "shared":
            x = g = proj
        else:
            x, g = proj.split([self.d_inner, self.d_inner], dim=-1)
        if self.conv is not None:
            x = self.conv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        return self.act(x), g

    def coefficients(self, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Line 10 on the grid frame: ``xs (B, H, W, di)`` -> ``delta (B, K, di, H, W)`` (before bias and
        softplus), ``B, C (B, K, N, H, W)``. The projections are pointwise, so computing them on the grid
        and traversing afterwards equals projecting each traversed sequence."""
        r, N = self.dt_rank, self.d_state
        dbl = torch.einsum("bhwd,kcd->bkchw", xs, self.x_proj_weight)
        dt, Bm, Cm = dbl.split([r, N, N], dim=2)
        delta = torch.einsum("bkrhw,kdr->bkdhw", dt, self.dt_proj_weight)
        return delta, Bm.contiguous(), Cm.contiguous()

    def scan(self, xs: torch.Tensor, coeffs=None, merge: bool = True) -> torch.Tensor:
        """Lines 6-12: GeoMamba-SSM over the K directions of ``xs (B, H, W, di)``.

        ``coeffs``: ``(delta, B, C)`` from :meth:`coefficients` (computed from ``xs`` when None; pass them
        to hold them fixed). Returns the merged ``(B, H, W, di)`` (sum or mean over directions), or with
        ``merge=False`` the un-traversed per-direction outputs ``(B, K, H, W, di)``.
        """
        if xs.dim() != 4 or xs.shape[-1] != self.d_inner:
            raise ValueError(f"GeoMamba scan takes (batch, H, W, {self.d_inner}); got {tuple(xs.shape)}.")
        if self.ssm == "2d":
            delta, Bm, Cm = self.coefficients(xs) if coeffs is None else coeffs
            y = self._scan_2d(xs, delta, Bm, Cm)
        else:
            y = self._scan_1d(xs, coeffs)
        if not merge:
            return y
        y = y.sum(1)
        return y / self.K if self.merge == "mean" else y

    def _scan_2d(self, xs, delta, Bm, Cm) -> torch.Tensor:
        fn = selective_scan_2d_ref if self.scan_backend == "ref" else selective_scan_2d
        kw = {} if self.scan_backend == "ref" else {"backend": self.scan_backend}
        y = fn(
            xs.permute(0, 3, 1, 2),
            delta,
            self.A(),
            Bm,
            Cm,
            self.d_tensor(),
            self.r_tensor(),
            delta_bias=self.dt_proj_bias,
            delta_softplus=True,
            directions=self.directions,
            correction_form=self.correction_form,
            merge=False,
            **kw,
        )  # (B, K, di, H, W)
        return y.permute(0, 1, 3, 4, 2)

    def _scan_1d(self, xs, coeffs=None) -> torch.Tensor:
        b, H, W, di = xs.shape
        K, N, L, r = self.K, self.d_state, H * W, self.dt_rank
        seqs = cross_scan(xs, self.directions)  # (b, K, L, di)
        if coeffs is None:  # project each traversed sequence with its direction's weights
            dbl = torch.einsum("bkld,kcd->bkcl", seqs, self.x_proj_weight)
            dt, Bm, Cm = dbl.split([r, N, N], dim=2)
            delta = torch.einsum("bkrl,kdr->bkdl", dt, self.dt_proj_weight)  # (b, K, di, L)
            Bm, Cm = Bm.contiguous(), Cm.contiguous()  # (b, K, N, L)
        else:  # grid-frame coefficients: traverse those of direction k along direction k
            trav = lambda t: torch.stack(
                [
                    cross_scan(tk.permute(0, 2, 3, 1), (d,))[:, 0]  # noqa: E731
                    for tk, d in zip(t.unbind(1), self.directions)
                ],
                dim=1,
            ).transpose(-1, -2)
            delta, Bm, Cm = (trav(t).contiguous() for t in coeffs)
        u = seqs.transpose(-1, -2).reshape(b, K * di, L)
        Dk = self.d_tensor()
        y = selective_scan(
            u,
            delta.reshape(b, K * di, L),
            self.A().reshape(K * di, N),
            Bm,
            Cm,
            None if Dk is None else Dk.reshape(K * di),
            delta_bias=self.dt_proj_bias.reshape(K * di),
            delta_softplus=True,
            backend=self.scan_backend,
        ).view(b, K, di, L)
        R = self.r_tensor()
        if R is not None:
            u4 = u.view(b, K, di, L)
            R = R.to(u.dtype)
            if self.correction_form == "alg2":
                corr = u4 * torch.einsum("kdn,bknl->bkdl", R, Cm)
            else:
                step = F.softplus(delta + self.dt_proj_bias[None, :, :, None])
                w = Bm * Cm if self.correction_form == "cbx" else Bm
                corr = step * u4 * torch.einsum("kdn,bknl->bkdl", R, w)
            y = y - corr
        return cross_unscan(y.transpose(-1, -2), H, W, self.directions)  # (b, K, H, W, di)

    def gate_out(self, y: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """Lines 13-14: ``out_proj(act(LN(y)) * act(g))`` (or ``LN(y) * act(g)`` with ``norm_act=False``)."""
        y = self.out_norm(y)
        if self.norm_act:
            y = self.act(y)
        return self.out_proj(y * self.act(g))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        if z.dim() != 4 or z.shape[-1] != self.d_model:
            raise ValueError(
                f"GeoMambaKernel takes a token grid (batch, H, W, {self.d_model}), channels last; got "
                f"shape {tuple(z.shape)}."
            )
        xs, g = self.branch(z)
        return self.gate_out(self.scan(xs), g)
