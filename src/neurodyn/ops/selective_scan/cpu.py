"""Autograd wrapper around the fused CPU selective-scan kernel (``csrc/selective_scan_cpu.cpp``).

Layout preparation (casting, padding the state size to a multiple of 8, putting input-dependent B/C
time-major as (b, G, L, n_pad)) is done with ordinary torch ops *outside* the autograd Function, so
autograd maps the kernel's gradients back to the caller's layouts and dtypes by itself. The Function reaches the
kernel through the operators ``torch.ops.neurodyn.selective_scan_fwd`` / ``_bwd`` (:mod:`neurodyn.ops.kernel_ops`:
schemas and fakes), so ``torch.compile`` traces it without a graph break and ``torch.export`` captures it.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..kernel_ops import OPS

Tensor = torch.Tensor


class _SelectiveScanCpu(torch.autograd.Function):
    """y = scan(u, dt, A, B, C) + D u on the kernel; dt is the final step size (softplus applied).

    ``zoh``: the input term is ``(1 - exp(dt A)) / (-A) B u`` (Kirchhoff cell, exact ZOH) instead of
    ``dt B u``; needs ``A < 0`` everywhere (padded states included).
    """

    @staticmethod
    def forward(ctx, u, dt, A, B, C, D, h0, zoh=False):
        need = any(ctx.needs_input_grad)
        out, last, ckpt = OPS["selective_scan_fwd"](u, dt, A, B, C, D, h0, need, zoh)
        ctx.has = (D is not None, h0 is not None)
        ctx.zoh = zoh
        if need:
            keep = [t if t is not None else torch.empty(0) for t in (D, h0)]
            ctx.save_for_backward(u, dt, A, B, C, ckpt, *keep)
        return out, last

    @staticmethod
    def backward(ctx, gout, glast):
        u, dt, A, B, C, ckpt, *opt = ctx.saved_tensors
        D, h0 = (t if h else None for t, h in zip(opt, ctx.has))
        gout = torch.zeros_like(u) if gout is None else gout.contiguous()
        glast = None if glast is None else glast.contiguous()
        gu, gdt, gA, gB, gC, gD, gh0 = OPS["selective_scan_bwd"](u, dt, A, B, C, D, h0, ckpt, gout, glast, ctx.zoh)
        cdt = u.dtype
        gA = gA.sum(0).to(cdt)
        if B.dim() != 4:
            gB = gB.sum(0).to(cdt)
        if C.dim() != 4:
            gC = gC.sum(0).to(cdt)
        gD = gD.sum(0).to(cdt) if D is not None else None
        return gu, gdt, gA, gB, gC, gD, gh0 if h0 is not None else None, None


def _pad_last(x: Tensor, npad: int, value: float = 0.0) -> Tensor:
    n = x.shape[-1]
    return x if n == npad else F.pad(x, (0, npad - n), value=value)


def _pad_A(A: Tensor, npad: int, zoh: bool) -> Tensor:
    """``(d, n)`` -> ``(d, n_pad)``. Padded states have zero B and C, so their A only has to keep them finite:
    ``-1`` for ZOH (which divides by ``-A``); for Euler a copy of the last state's A, so a row whose states
    share one A (Mamba-2's scalar A per head) stays uniform and takes the kernel's one-exponential path."""
    n = A.shape[-1]
    if n == npad:
        return A.contiguous()
    if zoh:
        return F.pad(A, (0, npad - n), value=-1.0).contiguous()
    return torch.cat([A, A[:, -1:].expand(-1, npad - n)], dim=-1).contiguous()


def _prep_coef(W: Tensor, npad: int, cdt: torch.dtype) -> Tensor:
    if W.dim() == 2:  # fixed (d, n)
        return _pad_last(W.to(cdt), npad).contiguous()
    return _pad_last(W.to(cdt).transpose(-1, -2), npad).contiguous()  # (b, G, L, n_pad)


def selective_scan_cpu(u, delta, A, B, C, D, z, delta_bias, softplus, initial_state, cdt, zoh=False):
    """Fused-kernel selective scan. Arguments validated, B/C 2-D or 4-D; returns (out, last) in ``cdt``.

    ``zoh=True`` computes the Kirchhoff cell's exact ZOH input factor ``(1 - exp(dt A)) / (-A)`` in the
    kernel (``A < 0``; padded states get ``A = -1`` with zero B and C, so they stay at zero).

    softplus, delta_bias and the z gate are (batch, d, L) elementwise ops done here by torch
    (vectorised, differentiated by autograd); the kernel does the (batch, d, L, n) work.
    """
    n = A.shape[1]
    npad = -(-n // 8) * 8
    c = lambda t: None if t is None else t.to(cdt)  # noqa: E731
    dt = c(delta)
    if delta_bias is not None:
        dt = dt + c(delta_bias)[:, None]
    if softplus:
        dt = F.softplus(dt)
    h0 = None if initial_state is None else _pad_last(c(initial_state), npad).contiguous()
    y, last = _SelectiveScanCpu.apply(
        c(u).contiguous(), dt.contiguous(), _pad_A(c(A), npad, zoh),
        _prep_coef(B, npad, cdt), _prep_coef(C, npad, cdt), None if D is None else c(D).contiguous(), h0, zoh,
    )
    if z is not None:
        y = y * F.silu(c(z))
    return y, last[..., :n]
