"""The linear scan's pure-PyTorch path: the chunked scan (:func:`neurodyn.ops.selective_scan.chunked.chunk_scan`)
forward and backward, and the adjoint every backend's backward shares.

Along dim 1 of ``(P, L, Q)`` tensors, with ``h`` the forward's output: the adjoint ``lam_t = g_t + a_{t+1}
lam_{t+1}`` (a scan the other way with the next step's decay, 1 past the end), ``gx = lam``, ``ga_t = lam_t
h_{t-1}`` (``h0`` or 0 before the first step), ``gh0 = a_0 lam_0``.
"""

from __future__ import annotations

import torch

from ..selective_scan.chunked import chunk_scan

Tensor = torch.Tensor

__all__ = ["LinearScanChunked", "adjoint_grads", "next_decay", "scan_chunked"]


def scan_chunked(a: Tensor, x: Tensor, h0: Tensor | None, reverse: bool) -> Tensor:
    """Raw scan along dim 1 of contiguous (P, L, Q) tensors on the chunked PyTorch scan (no autograd of its own)."""
    if reverse:
        return chunk_scan(a.flip(1), x.flip(1), h0).flip(1)
    return chunk_scan(a, x, h0)


def next_decay(a: Tensor, reverse: bool) -> Tensor:
    """a_{t+1} in scan order (the decay that multiplies lam_{t+1} in the adjoint), 1 at the end."""
    one = torch.ones_like(a[:, :1])
    return torch.cat([one, a[:, :-1]], 1) if reverse else torch.cat([a[:, 1:], one], 1)


def adjoint_grads(a: Tensor, h: Tensor, h0: Tensor | None, lam: Tensor, reverse: bool):
    """``(ga, gx, gh0)`` from the adjoint ``lam`` (``gh0`` None without ``h0``)."""
    first = h0.unsqueeze(1) if h0 is not None else torch.zeros_like(h[:, :1])
    h_prev = torch.cat([h[:, 1:], first], 1) if reverse else torch.cat([first, h[:, :-1]], 1)
    gh0 = None
    if h0 is not None:
        i = -1 if reverse else 0
        gh0 = a[:, i] * lam[:, i]
    return lam * h_prev, lam, gh0


class LinearScanChunked(torch.autograd.Function):
    """``h_t = a_t h_{t-1} + x_t`` along dim 1 of contiguous ``(P, L, Q)`` tensors on the chunked PyTorch scan."""

    @staticmethod
    def forward(ctx, a, x, h0, reverse: bool):
        h = scan_chunked(a, x, h0, reverse)
        ctx.reverse, ctx.has_h0 = reverse, h0 is not None
        ctx.save_for_backward(a, h, h0 if h0 is not None else torch.empty(0))
        return h

    @staticmethod
    def backward(ctx, gh):
        a, h, h0 = ctx.saved_tensors
        h0 = h0 if ctx.has_h0 else None
        lam = scan_chunked(next_decay(a, ctx.reverse), gh.contiguous(), None, not ctx.reverse)
        ga, gx, gh0 = adjoint_grads(a, h, h0, lam, ctx.reverse)
        return ga, gx, gh0, None
