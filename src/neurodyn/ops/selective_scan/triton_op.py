"""The selective scan's Triton kernels (``triton_kernels.py``) as operators, their tiles, and the call the public
function makes.

``torch.ops.neurodyn.selective_scan_triton(u, delta, A, B, C, D?, z?, delta_bias?, h0?, softplus, reverse,
save_checkpoints, block_l, block_d, zoh) -> (out, last, ckpt)`` and ``selective_scan_triton_bwd``
(:func:`neurodyn.ops.custom_op.define_op`): bias, softplus, D, the z gate, reverse, initial and last state in one
kernel; ``B, C`` fixed ``(d, n)`` or ``(batch, G, n, L)``; ``zoh``: the Kirchhoff cell's exact ZOH input
(:mod:`neurodyn.ops.knc_scan`). ``ckpt (batch, d, ceil(L / block_l), n)`` holds the state entering every chunk of
``block_l`` steps (empty unless ``save_checkpoints``); the backward recomputes each chunk's states from it. The
implementation loads the kernel module when it first runs (:func:`neurodyn.ops.triton_loader.load`: on CUDA tensors
compiled, on CPU tensors in Triton's interpreter); the block sizes are arguments of the schema (chosen by
:func:`scan_blocks`), so the fakes know every shape.
"""

from __future__ import annotations

import torch

from .. import triton_loader
from ..custom_op import cdiv, compute_dtype, contiguous, define_op, needs_grad
from ..triton_loader import ceil_pow2, floor_pow2

Tensor = torch.Tensor

__all__ = ["SCAN_BLOCK_L", "SCAN_WARPS", "SCAN_BLOCK_D", "scan_blocks", "selective_scan_triton"]

# tile sizes. The selective-scan kernels (triton_kernels.py) walk L in chunks of SCAN_BLOCK_L steps (also the
# checkpoint interval): 16 consecutive steps per thread in the forward, 8 in the backward, so a 128-step chunk spans 8
# (16) lanes and a warp holds 4 (2) channels; SCAN_WARPS warps per program. Sized from ptxas for sm_90 (no spill,
# backward <= 168 registers), not from a GPU run. SCAN_BLOCK_D caps the channels per program (None: no cap; the tests
# set it to get several channel blocks at small sizes). The multi-head scan (neurodyn.ops.head_scan) takes the same.
SCAN_BLOCK_L = 128
SCAN_WARPS = 4
SCAN_BLOCK_D = None


def scan_blocks(dim: int, n: int, L: int) -> tuple[int, int]:
    """``(block_l, block_d)`` of the selective-scan kernels: chunks of ``block_l`` steps (a power of two, at most
    ``SCAN_BLOCK_L``, at least 4) and ``block_d`` channels per forward program, those that ``SCAN_WARPS`` warps hold
    at 16 steps per thread (at most ``SCAN_BLOCK_D``, and no more than the next power of two of ``dim``). ``n`` is
    not part of the choice: the states are a loop inside the kernels."""
    bl = max(min(SCAN_BLOCK_L, ceil_pow2(L)), 4)
    lanes = max(bl // 16, 1)
    bd = min((32 // lanes) * SCAN_WARPS, ceil_pow2(dim))
    if SCAN_BLOCK_D is not None:
        bd = min(bd, SCAN_BLOCK_D)
    return bl, floor_pow2(bd)


def _check_layout(u: Tensor, B: Tensor, C: Tensor) -> None:
    """The operators take arguments validated by :func:`neurodyn.ops.selective_scan.check_selective_scan_args`; the
    one layout the kernels could misread silently is a 3-D (batch, n, L) coefficient (pass it as (batch, 1, n, L))."""
    for name, W in (("B", B), ("C", C)):
        if W.dim() not in (2, 4):
            raise ValueError(
                f"selective_scan_triton: {name} has shape {tuple(W.shape)}; the operator takes (d, n) or "
                f"(batch, groups, n, L) (a (batch, n, L) coefficient as (batch, 1, n, L))"
            )


_ARGS = "Tensor u, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor? z, Tensor? delta_bias, Tensor? h0"


def _bwd(u, delta, A, B, C, D, z, delta_bias, h0, ckpt, gout, glast, softplus, reverse, block_l, block_d, zoh):
    _check_layout(u, B, C)
    k = triton_loader.load("selective_scan", u.device)
    return k.bwd(u, delta, A, B, C, D, z, delta_bias, h0, ckpt, gout, glast, softplus, reverse, block_l, block_d, zoh)


def _bwd_fake(u, delta, A, B, C, D, z, delta_bias, h0, ckpt, gout, glast, softplus, reverse, block_l, block_d, zoh):
    batch, dim, _ = u.shape
    n = A.shape[1]
    cdt = compute_dtype(u, delta, A, B, C, D, z, delta_bias, h0)
    new = lambda *shape: u.new_empty(*shape, dtype=cdt)  # noqa: E731
    coef = lambda W: new(*W.shape) if W.dim() == 4 else new(batch, dim, n)  # noqa: E731
    return (
        u.new_empty(u.shape),
        delta.new_empty(delta.shape),
        z.new_empty(z.shape) if z is not None else new(0),
        new(batch, dim, n) if h0 is not None else new(0),
        new(batch, dim, n),
        coef(B),
        coef(C),
        new(batch, dim),
        new(batch, dim),
    )


selective_scan_triton_bwd = define_op(
    "selective_scan_triton_bwd",
    f"({_ARGS}, Tensor ckpt, Tensor gout, Tensor? glast, bool softplus, bool reverse, "
    "int block_l, int block_d, bool zoh) -> (Tensor gu, Tensor gdelta, Tensor gz, Tensor gh0, Tensor gA, Tensor gB, "
    "Tensor gC, Tensor gD, Tensor gbias)",
    _bwd,
    _bwd_fake,
    backend="triton",
)


def _fwd(u, delta, A, B, C, D, z, delta_bias, h0, softplus, reverse, save_checkpoints, block_l, block_d, zoh):
    _check_layout(u, B, C)
    k = triton_loader.load("selective_scan", u.device)
    return k.fwd(u, delta, A, B, C, D, z, delta_bias, h0, softplus, reverse, save_checkpoints, block_l, block_d, zoh)


def _fwd_fake(u, delta, A, B, C, D, z, delta_bias, h0, softplus, reverse, save_checkpoints, block_l, block_d, zoh):
    batch, dim, L = u.shape
    n = A.shape[1]
    cdt = compute_dtype(u, delta, A, B, C, D, z, delta_bias, h0)
    ckpt = u.new_empty(batch, dim, cdiv(L, block_l), n, dtype=cdt) if save_checkpoints else u.new_empty(0, dtype=cdt)
    return u.new_empty(u.shape), u.new_empty(batch, dim, n, dtype=cdt), ckpt


def _backward(s, gout, glast, _gckpt):
    if s.ckpt.numel() == 0 and s.u.numel() > 0:
        raise RuntimeError(
            "selective_scan_triton: backward without checkpoints (the forward was called with save_checkpoints=False)"
        )
    gu, gdelta, gz, gh0, gA, gB, gC, gD, gbias = selective_scan_triton_bwd(
        s.u,
        s.delta,
        s.A,
        s.B,
        s.C,
        s.D,
        s.z,
        s.delta_bias,
        s.h0,
        s.ckpt,
        gout.contiguous(),
        contiguous(glast),
        s.softplus,
        s.reverse,
        s.block_l,
        s.block_d,
        s.zoh,
    )
    like = lambda g, t: None if t is None else g.to(t.dtype)  # noqa: E731
    fixed = lambda g, W: like(g if W.dim() == 4 else g.sum(0), W)  # noqa: E731
    return {
        "u": gu,
        "delta": gdelta,
        "A": like(gA.sum(0), s.A),
        "B": fixed(gB, s.B),
        "C": fixed(gC, s.C),
        "D": like(gD.sum(0), s.D),
        "z": gz if s.z is not None else None,
        "delta_bias": like(gbias.sum(0), s.delta_bias),
        "h0": like(gh0, s.h0),
    }


selective_scan_triton_op = define_op(
    "selective_scan_triton",
    f"({_ARGS}, bool softplus, bool reverse, bool save_checkpoints, int block_l, "
    "int block_d, bool zoh) -> (Tensor out, Tensor last, Tensor ckpt)",
    _fwd,
    _fwd_fake,
    backend="triton",
    save=("u", "delta", "A", "B", "C", "D", "z", "delta_bias", "h0", "ckpt"),
    backward=_backward,
)


def selective_scan_triton(
    u, delta, A, B, C, D=None, z=None, delta_bias=None, softplus=False, reverse=False, initial_state=None, zoh=False
):
    """The selective scan on the Triton kernels; arguments validated, ``B, C`` 2-D ``(d, n)`` or 4-D
    ``(batch, G, n, L)``. Returns ``(out (batch, d, L) in u's dtype, last (batch, d, n) in float32/64)``.

    ``zoh=True``: the Kirchhoff cell's exact zero-order-hold input factor ``(1 - exp(dt A)) / (-A)`` in place of
    ``dt`` (``A < 0``; :func:`neurodyn.ops.knc_scan.knc_scan`)."""
    triton_loader.check_device(u, "selective_scan")
    batch, dim, L = u.shape
    block_l, block_d = scan_blocks(dim, A.shape[1], L)
    args = [contiguous(t) for t in (u, delta, A, B, C, D, z, delta_bias, initial_state)]
    out, last, _ = selective_scan_triton_op(*args, softplus, reverse, needs_grad(*args), block_l, block_d, zoh)
    return out, last
