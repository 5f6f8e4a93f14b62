"""Helpers shared by the ops' Triton kernel modules (``ops/<op>/triton_kernels.py``), loaded like them once per build
(compiled / interpreted): a kernel module reaches them through :func:`neurodyn.ops.triton_loader.shared` while the
loader executes it. Never imported: it imports ``triton``."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def combine(a1, x1, a2, x2):
    """The first-order recurrence's associative combine: ``(a1, x1) . (a2, x2) = (a1 a2, a2 x1 + x2)``."""
    return a1 * a2, a2 * x1 + x2


@triton.jit
def rsum(x, axis: tl.constexpr):
    """tl.sum's reduction, called directly: tl.sum is itself a @triton.jit function, decorated when triton was
    imported, which the interpreter cannot call unless that was under TRITON_INTERPRET=1 (see the package docstring)."""
    return tl.reduce(x, axis, tl.standard._sum_combine)


@triton.jit
def steps(c, L, offs_s, BL: tl.constexpr, REVERSE: tl.constexpr):
    """``(s, t)`` of chunk ``c``'s lanes ``offs_s``: scan steps ``s = c BL + offs_s`` and the times they read,
    ``t = s`` or, with ``REVERSE``, ``t = L - 1 - s`` (lanes with ``s`` outside ``[0, L)`` are the caller's to mask)."""
    s = c * BL + offs_s
    if REVERSE:
        t = L - 1 - s
    else:
        t = s
    return s, t
