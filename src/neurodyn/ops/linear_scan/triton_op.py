"""The linear scan's Triton kernels (``triton_kernels.py``) as operators, their tiles, and the call the public
function makes.

``torch.ops.neurodyn.linear_scan_triton(a, x, h0?, reverse, block_l, block_q) -> h`` and ``linear_scan_triton_bwd``
(:func:`neurodyn.ops.custom_op.define_op`): ``h_t = a_t h_{t-1} + x_t`` along dim 1 of ``(P, L, Q)``; the backward
reads the forward's ``h`` (nothing recomputed).
"""

from __future__ import annotations

import torch

from .. import triton_loader
from ..custom_op import contiguous, define_op
from ..triton_loader import ceil_pow2, floor_pow2

Tensor = torch.Tensor

__all__ = ["LINEAR_BLOCK_L", "LINEAR_TILE", "linear_blocks", "linear_scan_triton"]

LINEAR_BLOCK_L = 32
LINEAR_TILE = 2048


def linear_blocks(L: int, Q: int) -> tuple[int, int]:
    """``(block_l, block_q)`` of the linear-scan kernels (tiles of about ``LINEAR_TILE`` elements)."""
    bl = max(min(LINEAR_BLOCK_L, ceil_pow2(L)), 4)
    return bl, floor_pow2(min(ceil_pow2(Q), LINEAR_TILE // bl))


def _bwd_fake(a, h, h0, gh, reverse, block_l, block_q):
    return a.new_empty(a.shape), h.new_empty(h.shape), h0.new_empty(h0.shape) if h0 is not None else h.new_empty(0)


linear_scan_triton_bwd = define_op(
    "linear_scan_triton_bwd",
    "(Tensor a, Tensor h, Tensor? h0, Tensor gh, bool reverse, int block_l, int block_q) "
    "-> (Tensor ga, Tensor gx, Tensor gh0)",
    triton_loader.launcher("linear_scan", "bwd", device_of=1),
    _bwd_fake,
    backend="triton",
)


def _fwd_fake(a, x, h0, reverse, block_l, block_q):
    return x.new_empty(x.shape)


def _backward(s, gh):
    ga, gx, gh0 = linear_scan_triton_bwd(s.a, s.h, s.h0, gh.contiguous(), s.reverse, s.block_l, s.block_q)
    return {"a": ga, "x": gx, "h0": gh0 if s.h0 is not None else None}


linear_scan_triton_op = define_op(
    "linear_scan_triton",
    "(Tensor a, Tensor x, Tensor? h0, bool reverse, int block_l, int block_q) -> Tensor h",
    triton_loader.launcher("linear_scan", "fwd", device_of=1),
    _fwd_fake,
    backend="triton",
    save=("a", "h0", "h"),
    backward=_backward,
)


def linear_scan_triton(a: Tensor, x: Tensor, h0: Tensor | None, reverse: bool) -> Tensor:
    """``h_t = a_t h_{t-1} + x_t`` along dim 1 of ``(P, L, Q)`` tensors ``a``, ``x`` (``h0: (P, Q)``) on the Triton
    kernels; ``h`` in x's dtype, accumulated in float32 (float64 for float64 inputs)."""
    triton_loader.check_device(x, "linear_scan")
    block_l, block_q = linear_blocks(x.shape[1], x.shape[2])
    return linear_scan_triton_op(a.contiguous(), x.contiguous(), contiguous(h0), reverse, block_l, block_q)
