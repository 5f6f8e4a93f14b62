"""First-order linear recurrence along one axis: ``h_t = a_t * h_{t-1} + x_t``.

The building block of the 2-D scan (a row scan, then a column scan). ``a`` are decays (normally in
[0, 1], e.g. ``exp(delta * A)``); ``a`` and ``x`` broadcast to a common shape. Forward and backward
(the adjoint ``lam_t = g_t + a_{t+1} lam_{t+1}``; ``dx = lam``, ``da_t = lam_t h_{t-1}``) run on the
fused C++ kernel for CPU tensors when it is available, on the Triton kernels (:mod:`neurodyn.ops.triton_ops`) for CUDA
tensors when ``triton`` imports (the default pending a GPU measurement), else on the chunked PyTorch scan.
"""
from __future__ import annotations

import torch

from ...errors import check_choice
from .. import kernel_ops, triton_loader
from ..kernel_ops import OPS
from ..selective_scan.chunked import chunk_scan
from ..triton_ops import linear_scan_triton

Tensor = torch.Tensor


def _scan3(a: Tensor, x: Tensor, h0: Tensor | None, reverse: bool, use_cpp: bool) -> Tensor:
    """Raw scan along dim 1 of contiguous (P, L, Q) tensors (no autograd)."""
    if use_cpp and x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
        if kernel_ops.available():
            return OPS["linear_scan"](a.contiguous(), x.contiguous(), None if h0 is None else h0.contiguous(), reverse)
    if reverse:
        return chunk_scan(a.flip(1), x.flip(1), h0).flip(1)
    return chunk_scan(a, x, h0)


def _shift(a: Tensor, reverse: bool) -> Tensor:
    """a_{t+1} in scan order (the decay that multiplies lam_{t+1} in the adjoint), 1 at the end."""
    one = torch.ones_like(a[:, :1])
    return torch.cat([one, a[:, :-1]], 1) if reverse else torch.cat([a[:, 1:], one], 1)


class _LinearScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, x, h0, reverse: bool, use_cpp: bool):
        h = _scan3(a, x, h0, reverse, use_cpp)
        ctx.reverse, ctx.use_cpp, ctx.has_h0 = reverse, use_cpp, h0 is not None
        ctx.save_for_backward(a, h, h0 if h0 is not None else torch.empty(0))
        return h

    @staticmethod
    def backward(ctx, gh):
        a, h, h0 = ctx.saved_tensors
        rev = ctx.reverse
        lam = _scan3(_shift(a, rev), gh.contiguous(), None, not rev, ctx.use_cpp)
        first = h0.unsqueeze(1) if ctx.has_h0 else torch.zeros_like(h[:, :1])
        h_prev = torch.cat([h[:, 1:], first], 1) if rev else torch.cat([first, h[:, :-1]], 1)
        ga = lam * h_prev
        gh0 = None
        if ctx.has_h0:
            i = -1 if rev else 0
            gh0 = a[:, i] * lam[:, i]
        return ga, lam, gh0, None, None


def linear_scan(a: Tensor, x: Tensor, h0: Tensor | None = None, dim: int = -1, reverse: bool = False,
                backend: str = "auto") -> Tensor:
    """``h_t = a_t h_{t-1} + x_t`` along ``dim`` (``h_{-1} = h0``; ``reverse`` runs from the end).

    ``a`` and ``x`` broadcast to the output shape ``S``; ``h0`` has ``S`` without ``dim``.
    ``backend``: ``"auto"`` (C++ kernel on CPU when available, Triton kernel on CUDA when ``triton`` imports),
    ``"triton"`` (CPU tensors need ``TRITON_INTERPRET=1``: the interpreter), ``"cpp"`` or ``"torch"``.
    Differentiable in ``a``, ``x`` and ``h0``.
    """
    check_choice("backend", backend, ("auto", "triton", "cpp", "torch"), error=ValueError)
    shape = torch.broadcast_shapes(a.shape, x.shape)
    dim = dim % len(shape)
    a, x = a.expand(shape), x.expand(shape)
    P = 1
    for s in shape[:dim]:
        P *= s
    L = shape[dim]
    Q = 1
    for s in shape[dim + 1:]:
        Q *= s
    if h0 is not None:
        want = shape[:dim] + shape[dim + 1:]
        if tuple(h0.shape) != tuple(want):
            raise ValueError(f"h0 has shape {tuple(h0.shape)}, expected {tuple(want)} (the output shape "
                             f"without the scanned dim {dim})")
        h0 = h0.reshape(P, Q)
    if 0 in shape:  # empty in, empty out (the scans' reshapes need a non-empty tensor)
        return x.clone()
    if triton_loader.chosen(backend, x):
        h = linear_scan_triton(a.reshape(P, L, Q), x.reshape(P, L, Q), h0, reverse)
        return h.reshape(shape)
    use_cpp = backend != "torch"
    if backend == "cpp" and (not kernel_ops.available() or x.device.type != "cpu"):
        raise RuntimeError("backend='cpp' needs CPU tensors and the compiled kernel")
    h = _LinearScan.apply(a.reshape(P, L, Q).contiguous(), x.reshape(P, L, Q).contiguous(), h0,
                          reverse, use_cpp)
    return h.reshape(shape)
