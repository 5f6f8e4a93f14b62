"""First-order linear recurrence along one axis: ``h_t = a_t * h_{t-1} + x_t``.

The building block of the 2-D scan (a row scan, then a column scan). ``a`` are decays (normally in
[0, 1], e.g. ``exp(delta * A)``); ``a`` and ``x`` broadcast to a common shape. Forward and backward
(the adjoint ``lam_t = g_t + a_{t+1} lam_{t+1}``; ``dx = lam``, ``da_t = lam_t h_{t-1}``) run on the
fused C++ kernel for CPU tensors when it is available (``cpu.py``), on the Triton kernels (``triton_kernels.py``, the
operator of ``triton_op.py``) for CUDA tensors when ``triton`` imports (the default pending a GPU measurement), else on
the chunked PyTorch scan (``chunked.py``).
"""

from __future__ import annotations

import torch

from ...errors import check_choice
from .. import cpu_kernel, triton_loader
from .chunked import LinearScanChunked
from .cpu import linear_scan_cpu
from .triton_op import linear_scan_triton

Tensor = torch.Tensor

__all__ = ["linear_scan"]


def linear_scan(
    a: Tensor, x: Tensor, h0: Tensor | None = None, dim: int = -1, reverse: bool = False, backend: str = "auto"
) -> Tensor:
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
    for s in shape[dim + 1 :]:
        Q *= s
    if h0 is not None:
        want = shape[:dim] + shape[dim + 1 :]
        if tuple(h0.shape) != tuple(want):
            raise ValueError(
                f"h0 has shape {tuple(h0.shape)}, expected {tuple(want)} (the output shape "
                f"without the scanned dim {dim})"
            )
        h0 = h0.reshape(P, Q)
    if 0 in shape:  # empty in, empty out (the scans' reshapes need a non-empty tensor)
        return x.clone()
    if triton_loader.chosen(backend, x):
        h = linear_scan_triton(a.reshape(P, L, Q), x.reshape(P, L, Q), h0, reverse)
        return h.reshape(shape)
    if backend == "cpp" and (not cpu_kernel.available() or x.device.type != "cpu"):
        raise RuntimeError("backend='cpp' needs CPU tensors and the compiled kernel")
    a, x = a.reshape(P, L, Q).contiguous(), x.reshape(P, L, Q).contiguous()
    if (
        backend != "torch"
        and x.device.type == "cpu"
        and x.dtype in (torch.float32, torch.float64)
        and cpu_kernel.available()
    ):
        h = linear_scan_cpu(a, x, h0, reverse)
    else:
        h = LinearScanChunked.apply(a, x, h0, reverse)
    return h.reshape(shape)
