"""The multi-head scan on the selective scan's Triton kernels (``selective_scan/triton_kernels.py``: ``head_fwd``,
``head_bwd``, which read this layout in place through strides) as operators, and the call the public function makes.

``torch.ops.neurodyn.head_scan_triton(u, dt, A, B, C, D?, save_checkpoints, block_l, block_d) -> (y, ckpt)`` and
``head_scan_triton_bwd`` (:func:`neurodyn.ops.custom_op.define_op`): one step and decay per head; ``ckpt (batch S,
H P, ceil(L / block_l), N)`` the state entering every chunk (empty unless ``save_checkpoints``); the tiles are the
selective scan's (:func:`neurodyn.ops.selective_scan.triton_op.scan_blocks`).
"""

from __future__ import annotations

import torch

from .. import triton_loader
from ..custom_op import cdiv, compute_dtype, contiguous, define_op, needs_grad
from ..selective_scan.triton_op import scan_blocks

Tensor = torch.Tensor

__all__ = ["head_scan_triton"]

_ARGS = "Tensor u, Tensor dt, Tensor A, Tensor B, Tensor C, Tensor? D"


def _bwd_fake(u, dt, A, B, C, D, ckpt, gy, block_l, block_d):
    batch, S, L, HP = u.shape
    cdt = compute_dtype(u, dt, A, B, C, D)
    new = lambda *shape: u.new_empty(*shape, dtype=cdt)  # noqa: E731
    return (
        u.new_empty(u.shape),
        new(*u.shape),
        new(batch * S, HP, B.shape[4]),
        new(*B.shape),
        new(*C.shape),
        new(batch * S, HP),
    )


head_scan_triton_bwd = define_op(
    "head_scan_triton_bwd",
    f"({_ARGS}, Tensor ckpt, Tensor gy, int block_l, int block_d) -> (Tensor gu, Tensor gdt, "
    "Tensor gA, Tensor gB, Tensor gC, Tensor gD)",
    triton_loader.launcher("selective_scan", "head_bwd"),
    _bwd_fake,
    backend="triton",
)


def _fwd_fake(u, dt, A, B, C, D, save_checkpoints, block_l, block_d):
    batch, S, L, HP = u.shape
    cdt = compute_dtype(u, dt, A, B, C, D)
    ckpt = (
        u.new_empty(batch * S, HP, cdiv(L, block_l), B.shape[4], dtype=cdt)
        if save_checkpoints
        else u.new_empty(0, dtype=cdt)
    )
    return u.new_empty(u.shape), ckpt


def _backward(s, gy, _gckpt):
    gu, gdt, gA, gB, gC, gD = head_scan_triton_bwd(
        s.u, s.dt, s.A, s.B, s.C, s.D, s.ckpt, gy.contiguous(), s.block_l, s.block_d
    )
    batch, S, L, HP = s.u.shape
    H = s.dt.shape[3]
    P = HP // H
    return {
        "u": gu,
        "dt": gdt.view(batch, S, L, H, P).sum(-1).to(s.dt.dtype),
        "A": gA.view(batch, S, H, P, -1).sum((0, 3, 4)).to(s.A.dtype),
        "B": gB.to(s.B.dtype),
        "C": gC.to(s.C.dtype),
        "D": gD.view(batch, S, HP).sum(0).to(s.D.dtype) if s.D is not None else None,
    }


head_scan_triton_op = define_op(
    "head_scan_triton",
    f"({_ARGS}, bool save_checkpoints, int block_l, int block_d) -> (Tensor y, Tensor ckpt)",
    triton_loader.launcher("selective_scan", "head_fwd"),
    _fwd_fake,
    backend="triton",
    save=("u", "dt", "A", "B", "C", "D", "ckpt"),
    backward=_backward,
)


def head_scan_triton(u, dt, A, B, C, D=None) -> Tensor:
    """:func:`neurodyn.ops.head_scan.head_scan` on the selective-scan kernels, reading its time-major layout in place
    (arguments validated): ``u (batch, S, L, H P)``, ``dt (batch, S, L, H)``, ``A (S, H)``, ``B, C (batch, S, L, G,
    N)``, ``D (S, H P)``; ``y`` like u. One program per (batch, set, block of channels); a channel reads its head's
    step and decay, its group's B and C."""
    triton_loader.check_device(u, "head_scan")
    block_l, block_d = scan_blocks(u.shape[3], B.shape[4], u.shape[2])
    args = [contiguous(t) for t in (u, dt, A, B, C, D)]
    return head_scan_triton_op(*args, needs_grad(*args), block_l, block_d)[0]
