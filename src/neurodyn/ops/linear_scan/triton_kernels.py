"""Triton kernels of the first-order linear scan ``h_t = a_t h_{t-1} + x_t`` along dim 1 of contiguous ``(P, L, Q)``
tensors (``h_{-1} = h0 (P, Q)`` or 0; ``REVERSE`` runs from ``t = L-1`` down). Loaded by
:func:`neurodyn.ops.triton_loader.load` only; the operators are in :mod:`neurodyn.ops.linear_scan.triton_op`.

One program per (row p, block of ``BQ`` columns), walking L in chunks of ``BL`` steps: a chunk is a ``(BL, BQ)`` tile
(coalesced along Q), scanned with ``tl.associative_scan`` and the first-order combine, plus the carried state.
Accumulation in float32 (float64 for float64 inputs), h stored in x's dtype.

Backward, with ``h`` the forward's output (nothing is recomputed): the adjoint ``lam_s = g_s + a_{s+1} lam_{s+1}``
(a reverse associative scan with the next step's decay, 1 past the end), ``gx = lam``, ``ga_s = lam_s h_{s-1}``
(``h0`` or 0 before the first step), ``gh0 = a_0 lam_0``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from neurodyn.ops.triton_loader import shared

common = shared()  # combine, rsum, steps (this build's)


@triton.jit
def _program(h0_ptr, Q, ACC: tl.constexpr, BL: tl.constexpr, BQ: tl.constexpr, HAS_H0: tl.constexpr):
    """A program's row ``p``, columns ``offs_q`` (mask ``mq``), chunk lanes ``offs_s`` and initial state (``h0``'s
    row, or zeros)."""
    p = tl.program_id(0)
    offs_q = tl.program_id(1) * BQ + tl.arange(0, BQ)
    offs_s = tl.arange(0, BL)
    mq = offs_q < Q
    h0 = tl.full((BQ,), 0.0, ACC)
    if HAS_H0:
        h0 = tl.load(h0_ptr + p * Q + offs_q, mask=mq, other=0.0).to(ACC)
    return p, offs_q, offs_s, mq, h0


@triton.jit
def _tile(p, c, L, Q, offs_s, offs_q, mq, BL: tl.constexpr, REVERSE: tl.constexpr):
    """Steps ``s`` of chunk ``c``'s lanes ``offs_s``, the mask of the ``(BL, BQ)`` tile (steps in ``[0, L)``, columns
    in Q's range: the caller adds ``s >= 0`` for lanes before the chunk) and its offsets in the ``(P, L, Q)``
    tensors."""
    s, t = common.steps(c, L, offs_s, BL, REVERSE)
    return s, (s < L)[:, None] & mq[None, :], (p * L + t)[:, None] * Q + offs_q[None, :]


@triton.jit
def _linear_scan_fwd_kernel(
    a_ptr,
    x_ptr,
    h0_ptr,
    h_ptr,
    L,
    Q,
    nchunks,
    ACC: tl.constexpr,
    BL: tl.constexpr,
    BQ: tl.constexpr,
    HAS_H0: tl.constexpr,
    REVERSE: tl.constexpr,
):
    p, offs_q, offs_s, mq, h = _program(h0_ptr, Q, ACC, BL, BQ, HAS_H0)
    for c in range(nchunks):
        s, m, idx = _tile(p, c, L, Q, offs_s, offs_q, mq, BL, REVERSE)
        a = tl.load(a_ptr + idx, mask=m, other=1.0).to(ACC)
        x = tl.load(x_ptr + idx, mask=m, other=0.0).to(ACC)
        pa, px = tl.associative_scan((a, x), 0, common.combine)
        hs = px + pa * h[None, :]
        tl.store(h_ptr + idx, hs, mask=m)
        h = common.rsum(tl.where((offs_s == BL - 1)[:, None], hs, 0.0), 0)


@triton.jit
def _linear_scan_bwd_kernel(
    a_ptr,
    h_ptr,
    h0_ptr,
    g_ptr,
    ga_ptr,
    gx_ptr,
    gh0_ptr,
    L,
    Q,
    nchunks,
    ACC: tl.constexpr,
    BL: tl.constexpr,
    BQ: tl.constexpr,
    HAS_H0: tl.constexpr,
    REVERSE: tl.constexpr,
):
    p, offs_q, offs_s, mq, h0 = _program(h0_ptr, Q, ACC, BL, BQ, HAS_H0)
    lam = tl.full((BQ,), 0.0, ACC)
    for i in range(nchunks):
        c = nchunks - 1 - i
        s, m, idx = _tile(p, c, L, Q, offs_s, offs_q, mq, BL, REVERSE)
        _, m1, idx1 = _tile(p, c, L, Q, offs_s + 1, offs_q, mq, BL, REVERSE)  # the next step
        a1 = tl.load(a_ptr + idx1, mask=m1, other=1.0).to(ACC)
        g = tl.load(g_ptr + idx, mask=m, other=0.0).to(ACC)
        qa, qx = tl.associative_scan((a1, g), 0, common.combine, reverse=True)
        lams = qx + qa * lam[None, :]
        lam = common.rsum(tl.where((offs_s == 0)[:, None], lams, 0.0), 0)
        sp, _, idxp = _tile(p, c, L, Q, offs_s - 1, offs_q, mq, BL, REVERSE)  # the previous step
        mp = (sp >= 0)[:, None] & m
        hp = tl.load(h_ptr + idxp, mask=mp, other=0.0).to(ACC)
        hp = tl.where((sp < 0)[:, None], h0[None, :], hp)
        tl.store(gx_ptr + idx, lams, mask=m)
        tl.store(ga_ptr + idx, lams * hp, mask=m)
    if HAS_H0:
        s0, _, idx0 = _tile(p, 0, L, Q, offs_s, offs_q, mq, BL, REVERSE)
        m0 = (s0 == 0)[:, None] & mq[None, :]
        a0 = common.rsum(tl.load(a_ptr + idx0, mask=m0, other=0.0).to(ACC), 0)
        tl.store(gh0_ptr + p * Q + offs_q, a0 * lam, mask=mq)


def _acc(*tensors):
    return tl.float64 if any(t is not None and t.dtype == torch.float64 for t in tensors) else tl.float32


def fwd(a, x, h0, reverse, block_l, block_q):
    """``h (P, L, Q)`` in x's dtype."""
    P, L, Q = x.shape
    h = torch.empty_like(x)
    grid = (P, triton.cdiv(Q, block_q))
    _linear_scan_fwd_kernel[grid](
        a,
        x,
        x if h0 is None else h0,
        h,
        L,
        Q,
        triton.cdiv(L, block_l),
        ACC=_acc(a, x, h0),
        BL=block_l,
        BQ=block_q,
        HAS_H0=h0 is not None,
        REVERSE=reverse,
    )
    return h


def bwd(a, h, h0, gh, reverse, block_l, block_q):
    """``(ga, gx, gh0)`` like a, h and h0 (gh0 empty without h0)."""
    P, L, Q = h.shape
    ga, gx = torch.empty_like(a), torch.empty_like(h)
    gh0 = torch.empty_like(h0) if h0 is not None else h.new_empty(0)
    grid = (P, triton.cdiv(Q, block_q))
    _linear_scan_bwd_kernel[grid](
        a,
        h,
        h if h0 is None else h0,
        gh,
        ga,
        gx,
        gx if h0 is None else gh0,
        L,
        Q,
        triton.cdiv(L, block_l),
        ACC=_acc(a, h, h0),
        BL=block_l,
        BQ=block_q,
        HAS_H0=h0 is not None,
        REVERSE=reverse,
    )
    return ga, gx, gh0
