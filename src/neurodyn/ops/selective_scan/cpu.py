"""The fused CPU selective-scan kernel (``csrc/selective_scan_cpu.cpp``) as operators, and the call that prepares its
layouts.

``torch.ops.neurodyn.selective_scan_fwd`` / ``selective_scan_bwd`` (:func:`neurodyn.ops.custom_op.define_op`):
``u, delta (batch, d, L)``; ``A (d, n_pad)``; ``B, C (d, n_pad)`` or ``(batch, G, L, n_pad)``; ``D (d,)``;
``h0 (batch, d, n_pad)``; ``delta`` the final step (softplus and bias applied); ``zoh``: the Kirchhoff cell's exact
ZOH input ``(1 - exp(dt A)) / (-A) B u`` instead of ``dt B u`` (needs ``A < 0`` everywhere, padded states
included). ``ckpt (batch, d, ceil(L / 64), n_pad)`` holds the state entering every chunk of ``SCAN_CHUNK`` steps
(empty unless ``save_checkpoints``); the forward carries the autograd formula, which calls the backward operator
(its per-row partial sums of the fixed coefficients' gradients reduced here).

Layout preparation (casting, padding the state size to a multiple of 8, putting input-dependent B/C time-major as
(b, G, L, n_pad)) is done with ordinary torch ops around the operator (:func:`selective_scan_cpu`), so autograd maps
the kernel's gradients back to the caller's layouts and dtypes by itself.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import cpu_kernel
from ..custom_op import cdiv, contiguous, define_op, needs_grad

Tensor = torch.Tensor

__all__ = ["SCAN_CHUNK", "selective_scan_cpu", "selective_scan_fwd", "selective_scan_bwd"]

SCAN_CHUNK = 64  # selective_scan_cpu.cpp CHUNK: a checkpoint every 64 steps (the fakes' shapes; checked against it)

_ARGS = "Tensor u, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor? h0"


def _bwd(u, delta, A, B, C, D, h0, ckpt, gout, glast, zoh):
    gu, gdelta, gA, gB, gC, gD, gh0 = cpu_kernel.library().selective_scan_bwd(
        u, delta, A, B, C, D, h0, ckpt, gout, glast, zoh
    )
    return gu, gdelta, gA, gB, gC, gD, cpu_kernel.defined(gh0, u)


def _bwd_fake(u, delta, A, B, C, D, h0, ckpt, gout, glast, zoh):
    batch, dim, _ = u.shape
    np_ = A.shape[1]
    f64 = lambda *shape: u.new_empty(*shape, dtype=torch.float64)  # noqa: E731 - the kernel's per-row partial sums
    coef = lambda W: W.new_empty(W.shape) if W.dim() == 4 else f64(batch, dim, np_)  # noqa: E731
    gh0 = u.new_empty(batch, dim, np_) if h0 is not None else u.new_empty(0)
    return (u.new_empty(u.shape), u.new_empty(u.shape), f64(batch, dim, np_), coef(B), coef(C), f64(batch, dim), gh0)


selective_scan_bwd = define_op(
    "selective_scan_bwd",
    f"({_ARGS}, Tensor ckpt, Tensor gout, Tensor? glast, bool zoh) -> (Tensor gu, "
    "Tensor gdelta, Tensor gA, Tensor gB, Tensor gC, Tensor gD, Tensor gh0)",
    _bwd,
    _bwd_fake,
    backend="cpp",
)


def _fwd(u, delta, A, B, C, D, h0, save_checkpoints, zoh):
    out, last, ckpt = cpu_kernel.library().selective_scan_fwd(u, delta, A, B, C, D, h0, save_checkpoints, zoh)
    return out, last, cpu_kernel.defined(ckpt, u)


def _fwd_fake(u, delta, A, B, C, D, h0, save_checkpoints, zoh):
    batch, dim, L = u.shape
    np_ = A.shape[1]
    ckpt = u.new_empty(batch, dim, cdiv(L, SCAN_CHUNK), np_) if save_checkpoints else u.new_empty(0)
    return u.new_empty(u.shape), u.new_empty(batch, dim, np_), ckpt


def _backward(s, gout, glast, _gckpt):
    gu, gdelta, gA, gB, gC, gD, gh0 = selective_scan_bwd(
        s.u, s.delta, s.A, s.B, s.C, s.D, s.h0, s.ckpt, gout.contiguous(), contiguous(glast), s.zoh
    )
    cdt = s.u.dtype
    fixed = lambda g, W: g if W.dim() == 4 else g.sum(0).to(cdt)  # noqa: E731
    return {
        "u": gu,
        "delta": gdelta,
        "A": gA.sum(0).to(cdt),
        "B": fixed(gB, s.B),
        "C": fixed(gC, s.C),
        "D": gD.sum(0).to(cdt) if s.D is not None else None,
        "h0": gh0 if s.h0 is not None else None,
    }


selective_scan_fwd = define_op(
    "selective_scan_fwd",
    f"({_ARGS}, bool save_checkpoints, bool zoh) -> (Tensor out, Tensor last, Tensor ckpt)",
    _fwd,
    _fwd_fake,
    backend="cpp",
    save=("u", "delta", "A", "B", "C", "D", "h0", "ckpt"),
    backward=_backward,
)


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
    args = (
        c(u).contiguous(),
        dt.contiguous(),
        _pad_A(c(A), npad, zoh),
        _prep_coef(B, npad, cdt),
        _prep_coef(C, npad, cdt),
        None if D is None else c(D).contiguous(),
        h0,
    )
    y, last, _ = selective_scan_fwd(*args, needs_grad(*args), zoh)
    if z is not None:
        y = y * F.silu(c(z))
    return y, last[..., :n]
