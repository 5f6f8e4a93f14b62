"""The fused CPU linear scan (``csrc/selective_scan_cpu.cpp``'s ``linear_scan``) as an operator, and the call the
public function makes.

``torch.ops.neurodyn.linear_scan(a, x, h0?, reverse) -> h`` (:func:`neurodyn.ops.custom_op.define_op`): ``h_t = a_t
h_{t-1} + x_t`` along dim 1 of contiguous ``(P, L, Q)`` float32 / float64 CPU tensors; its autograd formula runs the
same operator the other way on the adjoint (:func:`neurodyn.ops.linear_scan.chunked.adjoint_grads`).
"""

from __future__ import annotations

import torch

from .. import cpu_kernel
from ..custom_op import contiguous, define_op
from .chunked import adjoint_grads, next_decay

Tensor = torch.Tensor

__all__ = ["linear_scan_cpu", "linear_scan_op"]


def _scan(a, x, h0, reverse):
    return cpu_kernel.library().linear_scan(a, x, h0, reverse)


def _fake(a, x, h0, reverse):
    return x.new_empty(x.shape)


def _backward(s, gh):
    lam = linear_scan_op(next_decay(s.a, s.reverse), gh.contiguous(), None, not s.reverse)
    ga, gx, gh0 = adjoint_grads(s.a, s.h, s.h0, lam, s.reverse)
    return {"a": ga, "x": gx, "h0": gh0}


linear_scan_op = define_op(
    "linear_scan",
    "(Tensor a, Tensor x, Tensor? h0, bool reverse) -> Tensor h",
    _scan,
    _fake,
    backend="cpp",
    save=("a", "h0", "h"),
    backward=_backward,
)


def linear_scan_cpu(a: Tensor, x: Tensor, h0: Tensor | None, reverse: bool) -> Tensor:
    """The scan on the fused kernel: ``(P, L, Q)`` tensors ``a``, ``x`` (float32 / float64, CPU), ``h0 (P, Q)``."""
    return linear_scan_op(a.contiguous(), x.contiguous(), contiguous(h0), reverse)
