"""The fused CPU 2-D scan (``csrc/selective_scan_cpu.cpp``'s ``scan2d``: one direction, the row scan and the column
scan cell by cell with the states in a row buffer) as operators, and the call the public function makes.

``torch.ops.neurodyn.scan2d_fwd`` / ``scan2d_bwd`` (:func:`neurodyn.ops.custom_op.define_op`), in one direction's
frame: ``x, delta (batch, d, H, W)`` (``delta`` the final step); ``A, R (d, n_pad)``; ``B, C (batch, H, W, n_pad)``;
``D (d,)``; ``form`` indexes ``("cbx", "eq9", "alg2")``. ``ckpt (batch, d, ceil(H / 8), W, n_pad)`` holds the column
states entering every block of ``SCAN2D_ROWS`` rows (empty unless ``save_checkpoints``); the forward carries the
autograd formula (row checkpoints and the two adjoint recurrences, in the backward operator).
"""

from __future__ import annotations

import torch

from .. import cpu_kernel
from ..custom_op import cdiv, define_op, needs_grad

Tensor = torch.Tensor

__all__ = ["SCAN2D_ROWS", "scan2d_cpu", "scan2d_fwd", "scan2d_bwd"]

SCAN2D_ROWS = 8  # selective_scan_cpu.cpp ROWS: a row-state checkpoint every 8 rows (the fakes' shapes)

_ARGS = "Tensor x, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor R, int form"


def _bwd(x, delta, A, B, C, D, R, form, ckpt, gout):
    return tuple(cpu_kernel.library().scan2d_bwd(x, delta, A, B, C, D, R, form, ckpt, gout))


def _bwd_fake(x, delta, A, B, C, D, R, form, ckpt, gout):
    batch, dim = x.shape[:2]
    np_ = A.shape[1]
    f64 = lambda *shape: x.new_empty(*shape, dtype=torch.float64)  # noqa: E731
    return (
        x.new_empty(x.shape),
        x.new_empty(x.shape),
        f64(batch, dim, np_),
        B.new_empty(B.shape),
        C.new_empty(C.shape),
        f64(batch, dim),
        f64(batch, dim, np_),
    )


scan2d_bwd = define_op(
    "scan2d_bwd",
    f"({_ARGS}, Tensor ckpt, Tensor gout) -> (Tensor gx, Tensor gdelta, Tensor gA, Tensor gB, "
    "Tensor gC, Tensor gD, Tensor gR)",
    _bwd,
    _bwd_fake,
    backend="cpp",
)


def _fwd(x, delta, A, B, C, D, R, form, save_checkpoints):
    y, ckpt = cpu_kernel.library().scan2d_fwd(x, delta, A, B, C, D, R, form, save_checkpoints)
    if ckpt is None:
        return y, x.new_empty(0)
    # the kernel stores the column states entering row blocks 1 .. nck - 1 in slots 0 .. nck - 2 and leaves the last
    # slot unwritten (the backward never reads it); zeroed here (one row of states per channel), so that the output
    # is a function of the inputs like every other
    ckpt[:, :, -1].zero_()
    return y, ckpt


def _fwd_fake(x, delta, A, B, C, D, R, form, save_checkpoints):
    batch, dim, H, W = x.shape
    ckpt = x.new_empty(batch, dim, cdiv(H, SCAN2D_ROWS), W, A.shape[1]) if save_checkpoints else x.new_empty(0)
    return x.new_empty(x.shape), ckpt


def _backward(s, gy, _gckpt):
    gx, gdt, gA, gB, gC, gD, gR = scan2d_bwd(s.x, s.delta, s.A, s.B, s.C, s.D, s.R, s.form, s.ckpt, gy.contiguous())
    cdt = s.x.dtype
    return {
        "x": gx,
        "delta": gdt,
        "A": gA.sum(0).to(cdt),
        "B": gB,
        "C": gC,
        "D": gD.sum(0).to(cdt) if s.D is not None else None,
        "R": gR.sum(0).to(cdt),
    }


scan2d_fwd = define_op(
    "scan2d_fwd",
    f"({_ARGS}, bool save_checkpoints) -> (Tensor y, Tensor ckpt)",
    _fwd,
    _fwd_fake,
    backend="cpp",
    save=("x", "delta", "A", "B", "C", "D", "R", "ckpt"),
    backward=_backward,
)


def scan2d_cpu(x, dt, A, B, C, D, R, form: int) -> Tensor:
    """One direction on the fused kernel: inputs in the direction's frame, prepared (contiguous, the compute dtype,
    ``n`` padded to 8, ``dt`` final); ``y (batch, d, H, W)``."""
    return scan2d_fwd(x, dt, A, B, C, D, R, form, needs_grad(x, dt, A, B, C, D, R))[0]
