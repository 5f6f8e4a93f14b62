"""The fused CPU multi-head scan kernel (``csrc/head_scan_cpu.cpp``) as operators, and the call the public function
makes.

``torch.ops.neurodyn.head_scan_fwd`` / ``head_scan_bwd`` (:func:`neurodyn.ops.custom_op.define_op`): ``u (batch, S,
L, H P)``; ``dt (batch, S, L, H)``; ``A (S, H)``; ``B, C (batch, S, L, G, N)``; ``D (S, H P)``. One task of the kernel
is one lane block of one head (``batch S H (P / lanes)`` tasks, ``lanes`` channels each: :func:`head_lanes`); the
checkpoints hold every task's state every ``HEAD_CHUNK`` steps, and the backward's per-task partial sums are reduced
here (the forward carries the autograd formula, which calls the backward operator).
"""

from __future__ import annotations

import torch

from .. import cpu_kernel
from ..custom_op import cdiv, define_op, needs_grad

Tensor = torch.Tensor

__all__ = ["HEAD_CHUNK", "HEAD_LANES", "head_lanes", "head_scan_cpu", "head_scan_fwd", "head_scan_bwd"]

# blocking constants of csrc/head_scan_cpu.cpp that fix the shapes of the saved state (checked against the library)
HEAD_CHUNK = 32  # HCHUNK
HEAD_LANES = {torch.float32: 16, torch.float64: 8}  # HLanes<T>::W (64 bytes of channels)


def head_lanes(dtype: torch.dtype) -> int:
    """Channels per vector lane block of the head-scan kernel: a head's channel count must be a multiple of it."""
    return HEAD_LANES[torch.float64 if dtype == torch.float64 else torch.float32]


def _tasks(u, dt):
    batch, S, L, HP = u.shape
    H = dt.shape[3]
    lanes = head_lanes(u.dtype)
    nblk = (HP // H) // lanes
    return batch * S * H * nblk, nblk, lanes


_ARGS = "Tensor u, Tensor dt, Tensor A, Tensor B, Tensor C, Tensor? D"


def _bwd(u, dt, A, B, C, D, ckpt, gout):
    return tuple(cpu_kernel.library().head_scan_bwd(u, dt, A, B, C, D, ckpt, gout))


def _bwd_fake(u, dt, A, B, C, D, ckpt, gout):
    batch, S, L, _ = u.shape
    H, N = dt.shape[3], B.shape[4]
    tasks, nblk, lanes = _tasks(u, dt)
    f64 = lambda *shape: u.new_empty(*shape, dtype=torch.float64)  # noqa: E731
    return (
        u.new_empty(u.shape),
        u.new_empty(batch, S, L, H, nblk),
        f64(tasks),
        u.new_empty(tasks, L, N),
        u.new_empty(tasks, L, N),
        f64(tasks, lanes),
    )


head_scan_bwd = define_op(
    "head_scan_bwd",
    f"({_ARGS}, Tensor ckpt, Tensor gout) -> (Tensor gu, Tensor gdt, Tensor gA, Tensor gB, Tensor gC, Tensor gD)",
    _bwd,
    _bwd_fake,
    backend="cpp",
)


def _fwd(u, dt, A, B, C, D, save_checkpoints):
    y, ckpt = cpu_kernel.library().head_scan_fwd(u, dt, A, B, C, D, save_checkpoints)
    return y, cpu_kernel.defined(ckpt, u)


def _fwd_fake(u, dt, A, B, C, D, save_checkpoints):
    tasks, _, lanes = _tasks(u, dt)
    ckpt = u.new_empty(tasks, cdiv(u.shape[2], HEAD_CHUNK), B.shape[4], lanes) if save_checkpoints else u.new_empty(0)
    return u.new_empty(u.shape), ckpt


def _backward(s, gy, _gckpt):
    gu, gdt, gA, gB, gC, gD = head_scan_bwd(s.u, s.dt, s.A, s.B, s.C, s.D, s.ckpt, gy.contiguous())
    b, S, L, HP = s.u.shape
    H, (G, N) = s.dt.shape[3], s.B.shape[3:]
    nblk = gdt.shape[-1]
    per_group = lambda g: g.view(b, S, G, (H // G) * nblk, L, N).sum(3).permute(0, 1, 3, 2, 4)  # noqa: E731
    return {
        "u": gu,
        "dt": gdt.sum(-1),
        "A": gA.view(b, S, H, nblk).sum((0, 3)).to(s.u.dtype),
        "B": per_group(gB),
        "C": per_group(gC),
        "D": gD.view(b, S, HP).sum(0).to(s.u.dtype) if s.D is not None else None,
    }


head_scan_fwd = define_op(
    "head_scan_fwd",
    f"({_ARGS}, bool save_checkpoints) -> (Tensor y, Tensor ckpt)",
    _fwd,
    _fwd_fake,
    backend="cpp",
    save=("u", "dt", "A", "B", "C", "D", "ckpt"),
    backward=_backward,
)


def head_scan_cpu(u, dt, A, B, C, D) -> Tensor:
    """The multi-head scan on the fused kernel: arguments validated, in the compute dtype, contiguous; ``y`` like u."""
    return head_scan_fwd(u, dt, A, B, C, D, needs_grad(u, dt, A, B, C, D))[0]
