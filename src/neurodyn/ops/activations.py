"""Elementwise activations with a faster CPU form than ATen's.

``tanh``: on CPU in float32, ATen's ``tanh`` runs about 7x slower than its ``sigmoid`` (measured on the
NAC backbone's (4, 32, 16, 8, 36) activations: 1.9 vs 0.25 ms, one thread), and the NCP backbone spends
a sixth of a NAC training step in it. The identity ``tanh(x) = 2 sigmoid(2x) - 1`` gives the same value
within 2.4e-7 absolute (float32 rounding of the sigmoid, doubled); the backward is ``g (1 - y^2)`` from the
saved output, like ATen's. float64 and non-CPU tensors use ``torch.tanh`` (the reference).
"""

from __future__ import annotations

import torch

Tensor = torch.Tensor


class _TanhViaSigmoid(torch.autograd.Function):
    """``y = 2 sigmoid(2x) - 1``; ``dy/dx = 1 - y^2``."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        y = torch.sigmoid(x * 2).mul_(2).sub_(1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return torch.addcmul(g, g, y * y, value=-1.0)


def tanh(x: Tensor) -> Tensor:
    """``torch.tanh(x)``, through the sigmoid identity for float32 CPU tensors (see the module docstring)."""
    if x.device.type == "cpu" and x.dtype == torch.float32:
        return _TanhViaSigmoid.apply(x)
    return torch.tanh(x)
