"""Kirchhoff Neural Cell (KNC) scan of CHONN (paper 000, Eqs. 32-34 and 44-47) and its reference.

For channel ``i`` of ``D``, state ``n`` of ``N`` and step ``k`` (``Delta > 0``, ``lambda > 0``)::

    alpha_k[i,n] = exp(-Delta_k[i] lambda[i,n])                                   (Eq. 34)
    beta_k[i,n]  = (1 - alpha_k[i,n]) / lambda[i,n] * b_k[n]      (exact ZOH; "euler": Delta_k[i] b_k[n])
    v_k[i,n]     = alpha_k[i,n] v_{k-1}[i,n] + beta_k[i,n] u_k[i]                   (Eq. 32)
    y_k[i]       = sum_n c_k[n] v_k[i,n] + d[i] u_k[i]                              (Eq. 32)

:func:`knc_scan` runs it in the fused CPU kernel or the Triton kernel (the ZOH factor computed in-kernel), or on
:func:`neurodyn.ops.selective_scan` (``A = -lambda``, ``B_eff = b phi(Delta lambda)`` with
``phi(x) = (1 - e^-x) / x``, see :class:`ZOHInput`); :func:`knc_scan_ref` is the plain loop.
:func:`knc_impulse_response` / :func:`knc_transfer_function` are the fixed-coefficient closed forms
(Eqs. 44-45). Scan layouts (:func:`scan_sequences` / :func:`merge_sequences`) express the cell's traversal
modes ``uni`` / ``bi`` / ``cross`` through :mod:`neurodyn.ops.cross_scan`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..errors import ConfigError, check_choice
from .cross_scan import VMAMBA_ORDER, cross_scan, cross_unscan
from .directions import resolve_directions
from .selective_scan.checks import check_selective_scan_args, compute_dtype
from .selective_scan.cpu import selective_scan_cpu
from .selective_scan.interface import resolve_backend, selective_scan
from .selective_scan.triton_op import selective_scan_triton

Tensor = torch.Tensor

__all__ = [
    "SCANS",
    "SCAN_DIRECTIONS",
    "knc_phi",
    "knc_scan",
    "knc_scan_ref",
    "scan_sequences",
    "merge_sequences",
    "n_directions",
    "knc_transfer_function",
    "knc_impulse_response",
]

SCANS = ("uni", "bi", "cross")
# a scan mode -> its traversals, named as in ops.cross_scan (a sequence is a 1 x L grid)
SCAN_DIRECTIONS = {"uni": ("row",), "bi": ("row", "row_rev"), "cross": tuple(VMAMBA_ORDER)}
_DISCRETIZATIONS = ("zoh", "euler")


# ---------------------------------------------------------------------------------------------------
# the scan and its reference


def knc_phi(x: Tensor) -> Tensor:
    """``(1 - exp(-x)) / x`` for ``x >= 0`` (the ZOH input factor; ``phi(0) = 1``).

    ``x`` is clamped to ``>= 1e-6`` first: there ``phi`` differs from its limit by ``< 5e-7`` (below float32
    resolution) and the gradient stays finite.
    """
    x = x.clamp_min(1e-6)
    return -torch.expm1(-x) / x


class ZOHInput(torch.autograd.Function):
    """``B_eff[b, i, t, n] = phi(delta[b, i, t] lam[i, n]) * bt[b, i // (D/G), t, n]``, time-major.

    The same function as ``knc_phi(delta[..., None] * lam) * bt`` (grouped), with in-place arithmetic
    and only ``phi`` kept for the backward (no second exponential there): the exact
    ZOH input factor is otherwise the most expensive part of a cell on CPU. The backward uses
    ``dphi/dx = (1 - phi - x phi) / x``; in float32 its absolute error is about ``1e-7 / x`` (``x >= 1e-6``).
    ``delta (batch, D, L)``, ``lam (D, N)``, ``bt (batch, G, L, N)`` -> ``(batch, D, L, N)``.
    """

    @staticmethod
    def _x(delta, lam):
        x = delta.unsqueeze(-1) * lam[None, :, None, :]
        return x.clamp_(min=1e-6)

    @staticmethod
    def forward(ctx, delta, lam, bt):
        batch, D, L = delta.shape
        G, N = bt.shape[1], lam.shape[1]
        x = ZOHInput._x(delta, lam)
        phi = torch.neg(x).expm1_().neg_().div_(x)  # (1 - e^-x) / x
        out = (phi.view(batch, G, D // G, L, N) * bt.unsqueeze(2)).view(batch, D, L, N)
        ctx.save_for_backward(delta, lam, bt, phi)
        return out

    @staticmethod
    def backward(ctx, g):
        delta, lam, bt, phi = ctx.saved_tensors
        batch, D, L = delta.shape
        G, N = bt.shape[1], lam.shape[1]
        g5 = g.reshape(batch, G, D // G, L, N)
        gbt = (g5 * phi.view_as(g5)).sum(2) if ctx.needs_input_grad[2] else None
        # dphi/dx = (e^-x - phi) / x with e^-x = 1 - x phi (no second exponential)
        x = ZOHInput._x(delta, lam)
        t = torch.mul(x, phi).neg_().add_(1.0).sub_(phi).div_(x)
        t = t.view_as(g5).mul_(g5).mul_(bt.unsqueeze(2)).view(batch, D, L, N)
        gdelta = (t * lam[None, :, None, :]).sum(-1) if ctx.needs_input_grad[0] else None
        glam = (t * delta.unsqueeze(-1)).sum((0, 2)) if ctx.needs_input_grad[1] else None
        return gdelta, glam, gbt


def knc_scan(
    u: Tensor,
    delta: Tensor,
    lam: Tensor,
    b: Tensor,
    c: Tensor,
    d: Tensor | None = None,
    discretization: str = "zoh",
    reverse: bool = False,
    backend: str = "auto",
) -> Tensor:
    """Kirchhoff-cell recurrence (module docstring, Eqs. 32-34) on :func:`neurodyn.ops.selective_scan`.

    Args:
        u: ``(batch, D, L)`` input.
        delta: ``(batch, D, L)`` positive step ``Delta`` (already through softplus), or ``(D,)`` for a
            time-invariant cell (then ``b`` must be fixed).
        lam: ``(D, N)`` positive decay rates ``lambda``.
        b, c: fixed ``(D, N)``, or input-dependent ``(batch, N, L)`` / ``(batch, G, N, L)`` (channel ``i``
            uses group ``i // (D // G)``).
        d: ``(D,)`` skip, or None.
        discretization: ``"zoh"`` (exact, Eq. 34) or ``"euler"`` (``beta = Delta b``).
        reverse: scan from ``L - 1`` down to 0.
    Returns ``y: (batch, D, L)``.

    backend: as :func:`neurodyn.ops.selective_scan`. ``"cpp"`` (the ``"auto"`` choice on CPU when the
    kernel builds) and ``"triton"`` (the ``"auto"`` choice on CUDA when ``triton`` imports) run the whole cell, the
    ZOH factor included, in one fused kernel (forward and backward, nothing of size ``(batch, D, N, L)``
    allocated). The other backends run
    :func:`neurodyn.ops.selective_scan` on ``B_eff = b * phi(delta * lambda)``, built once as a
    ``(batch, D, N, L)`` view of a time-major ``(batch, D, L, N)`` buffer (:class:`ZOHInput`).
    """
    check_choice("knc_scan discretization", discretization, _DISCRETIZATIONS)
    batch, D, L = u.shape
    if b.dim() == 3:
        b = b.unsqueeze(1)
    which = resolve_backend(backend, u)
    if which == "cpp":
        return _knc_scan_cpp(u, delta, lam, b, c, d, discretization == "zoh", reverse)
    if which == "triton" and u.numel() > 0:
        return _knc_scan_triton(u, delta, lam, b, c, d, discretization == "zoh", reverse)
    if delta.dim() == 1:  # time-invariant step
        if b.dim() != 2:
            raise ValueError("knc_scan: a per-channel constant delta (D,) needs a fixed b (D, N)")
        B_eff = b * knc_phi(delta[:, None] * lam) if discretization == "zoh" else b
        delta = delta[None, :, None].expand(batch, D, L)
    elif discretization == "zoh":
        if b.dim() == 2:
            B_eff = knc_phi(delta.unsqueeze(-1) * lam[None, :, None, :]) * b[None, :, None, :]
            B_eff = B_eff.transpose(-1, -2)
        else:
            B_eff = ZOHInput.apply(delta, lam, b.transpose(-1, -2)).transpose(-1, -2)
    else:
        B_eff = b
    return selective_scan(u, delta, -lam, B_eff, c, d, reverse=reverse, backend=backend)


def _fused_args(u, delta, lam, b, c, d):
    """The cell's arguments as a fused kernel's selective scan takes them: ``(delta (batch, D, L), A = -lam, b, c)``
    with b, c validated (2-D or 4-D)."""
    batch, D, L = u.shape
    if delta.dim() == 1:  # time-invariant step
        if b.dim() != 2:
            raise ValueError("knc_scan: a per-channel constant delta (D,) needs a fixed b (D, N)")
        delta = delta[None, :, None].expand(batch, D, L)
    A = -lam
    b, c = check_selective_scan_args(u, delta, A, b, c, d)
    return delta, A, b, c


def _knc_scan_triton(u, delta, lam, b, c, d, zoh, reverse):
    """The cell on the Triton selective-scan kernel with its ZOH input factor (``zoh``), scanning either way in-kernel
    (:func:`neurodyn.ops.selective_scan.triton_op.selective_scan_triton`)."""
    delta, A, b, c = _fused_args(u, delta, lam, b, c, d)
    return selective_scan_triton(u, delta, A, b, c, d, reverse=reverse, zoh=zoh)[0]


def _knc_scan_cpp(u, delta, lam, b, c, d, zoh, reverse):
    """The cell on the fused CPU kernel: the ZOH factor ``(1 - e^{-Delta lambda}) / lambda`` (or Euler's
    ``Delta``) is computed per step and state inside the scan, forward and backward."""
    delta, A, b, c = _fused_args(u, delta, lam, b, c, d)
    cdt = compute_dtype(u, delta, A, b, c, d)
    if reverse:
        u, delta = u.flip(-1), delta.flip(-1)
        b, c = (b if b.dim() == 2 else b.flip(-1)), (c if c.dim() == 2 else c.flip(-1))
    out, _ = selective_scan_cpu(u, delta, A, b, c, d, None, None, False, None, cdt, zoh=zoh)
    out = out.to(u.dtype)
    return out.flip(-1) if reverse else out


def knc_scan_ref(
    u: Tensor,
    delta: Tensor,
    lam: Tensor,
    b: Tensor,
    c: Tensor,
    d: Tensor | None = None,
    discretization: str = "zoh",
    reverse: bool = False,
) -> Tensor:
    """The recurrence of Eq. (32) with Eq. (34) as a plain loop (the oracle of :func:`knc_scan`)."""
    batch, D, L = u.shape
    N = lam.shape[1]
    if delta.dim() == 1:
        delta = delta[None, :, None].expand(batch, D, L)

    def coef(W, t):  # (batch, D, N)
        if W.dim() == 2:
            return W.expand(batch, D, N)
        W = W.unsqueeze(1) if W.dim() == 3 else W
        return W[..., t].repeat_interleave(D // W.shape[1], dim=1)

    v = u.new_zeros(batch, D, N)
    ys = [None] * L
    for t in range(L - 1, -1, -1) if reverse else range(L):
        dl = delta[:, :, t, None] * lam  # (batch, D, N)
        alpha = torch.exp(-dl)
        beta = ((1 - alpha) / lam if discretization == "zoh" else delta[:, :, t, None]) * coef(b, t)
        v = alpha * v + beta * u[:, :, t, None]
        ys[t] = (coef(c, t) * v).sum(-1) + (d[None] * u[:, :, t] if d is not None else 0)
    return torch.stack(ys, dim=-1) if L else u.clone()


# ---------------------------------------------------------------------------------------------------
# scan layouts: channels-first (batch, D, *spatial) <-> (batch, K, D, L), through ops.cross_scan


def _scan_directions(scan: str, dims: int) -> tuple[str, ...]:
    dirs = resolve_directions(scan, VMAMBA_ORDER, SCAN_DIRECTIONS, single=False, what="scan", error=ConfigError)
    if scan == "cross" and dims != 2:
        raise ConfigError("scan='cross' (four 2-D traversals) needs a 2-D grid; use 'bi' on sequences")
    return dirs


def n_directions(scan: str, dims: int) -> int:
    """Number of traversals ``K`` of a scan mode on ``dims`` spatial axes."""
    return len(_scan_directions(scan, dims))


def _as_grid(x: Tensor) -> Tensor:
    """Channels-first ``(batch, D, L)`` or ``(batch, D, H, W)`` -> channels-last grid ``(batch, H, W, D)``."""
    return x.movedim(1, -1) if x.dim() == 4 else x.movedim(1, -1).unsqueeze(1)


def scan_sequences(x: Tensor, scan: str) -> Tensor:
    """``(batch, D, *spatial)`` -> ``(batch, K, D, L)``: the traversals of ``scan`` (``L = prod(spatial)``).

    ``uni``: row-major (the flattening); ``bi``: row-major and its reverse; ``cross``: ``row, col, row_rev,
    col_rev`` (VMamba's order; ``col`` is the column-major flattening). A sequence is a ``1 x L`` grid.
    """
    dirs = _scan_directions(scan, x.dim() - 2)
    return cross_scan(_as_grid(x), dirs).transpose(-1, -2)


def merge_sequences(y: Tensor, spatial: Sequence[int], scan: str) -> Tensor:
    """Inverse traversal of every direction and their sum: ``(batch, K, D, L)`` -> ``(batch, D, *spatial)``.

    Summed in pairs, ``(d_0 + d_2) + (d_1 + d_3)`` for ``cross`` (a direction plus its reverse first).
    """
    spatial = tuple(spatial)
    dirs = _scan_directions(scan, len(spatial))
    H, W = spatial if len(spatial) == 2 else (1, spatial[0])
    g = cross_unscan(y.transpose(-1, -2), H, W, dirs)  # (batch, K, H, W, D)
    if len(dirs) == 1:
        out = g[:, 0]
    elif len(dirs) == 2:
        out = g[:, 0] + g[:, 1]
    else:
        out = (g[:, 0] + g[:, 2]) + (g[:, 1] + g[:, 3])
    out = out.movedim(-1, 1)  # (batch, D, H, W)
    return out.reshape(*out.shape[:2], *spatial)


# ---------------------------------------------------------------------------------------------------
# fixed-coefficient theory (Eqs. 44-47): impulse responses and transfer functions


def knc_impulse_response(a: Tensor, b: Tensor, c: Tensor, d: Tensor, length: int) -> Tensor:
    """Impulse response of the cell ``v_{t+1} = a v_t + b u_t, y_t = c v_{t+1} + d u_t`` (Eq. 44).

    ``a, b, c: (..., N)`` (a sum of ``N`` first-order modes), ``d: (...)``; returns ``(..., length)``:
    ``h_0 = d + sum_n c_n b_n``, ``h_t = sum_n c_n b_n a_n^t`` (the inverse z-transform of Eq. 45).
    """
    t = torch.arange(length, dtype=a.dtype, device=a.device)
    h = (c * b).unsqueeze(-1) * a.unsqueeze(-1) ** t  # (..., N, length)
    h = h.sum(-2)
    h[..., 0] = h[..., 0] + d
    return h


def knc_transfer_function(a: Tensor, b: Tensor, c: Tensor, d: Tensor, z: Tensor) -> Tensor:
    """``H(z) = d + sum_n c_n b_n / (1 - a_n z^-1)`` (Eq. 45; one term per state) at complex points ``z``.

    ``a, b, c: (..., N)``, ``d: (...)``, ``z: (M,)`` complex -> ``(..., M)``. A cascade's transfer function
    is the product over its cells (Eq. 46).
    """
    zi = (1.0 / z).to(torch.complex128)
    terms = (c * b).to(torch.complex128).unsqueeze(-1) / (1 - a.to(torch.complex128).unsqueeze(-1) * zi)
    return d.to(torch.complex128).unsqueeze(-1) + terms.sum(-2)
