"""Triton kernels of the selective scan (forward, and backward by chunked recomputation). Loaded by
:func:`neurodyn.ops.triton_kernels.load` only; the operators are in :mod:`neurodyn.ops.triton_ops`.

The recurrence, in scan order ``s = 0 .. L-1`` (time ``t = s``, or ``t = L-1-s`` when ``REVERSE``)::

    dt_s = softplus(delta_t + bias)   (or delta_t + bias)        a_s = exp(dt_s A),  x_s = w_s B_t u_t   (b, d, n)
    h_s  = a_s h_{s-1} + x_s            (h_{-1} = h0 or 0)
    y_t  = sum_n C_t h_s + D u_t        out_t = y_t silu(z_t)    (or y_t)

with the input factor ``w_s = dt_s`` (Mamba's Euler input) or, with ``ZOH``, the Kirchhoff cell's exact zero-order
hold ``w_s = (1 - a_s) / lambda = dt_s phi(dt_s lambda)``, ``lambda = -A > 0`` (:mod:`neurodyn.ops.knc_scan`;
``dw/ddt = a``, ``dw/dA = dt^2 psi``, :func:`_zoh_factors`).

Layout (:func:`_standard_layout`): ``u, delta, z, out: (batch, d, L)``; ``A: (d, n)``; ``B, C``: ``(d, n)`` fixed
or ``(batch, G, n, L)`` (channel ``i`` in group ``i // (d / G)``); ``D, bias: (d,)``; ``h0, last: (batch, d, n)``;
all contiguous. The kernels address u-like tensors, delta, A, D and input-dependent B/C through strides, so that the
multi-head scan's time-major tensors are read in place (:func:`_head_layout`: batch and sets folded into the programs'
batch index, a channel reading its head's step and decay). Inputs may be float16/bfloat16/float32/float64; each load
is converted to the accumulation dtype ``ACC`` (float32, or float64 when an input is float64).

Forward: one program per (batch element, block of ``BD`` channels); the ``(BD, BN)`` states stay in registers while
the program walks L in chunks of ``BL`` steps. A chunk is one ``(BD, BN, BL)`` tile: its decays and inputs are loaded
(coalesced along L), the chunk-local recurrence is ``tl.associative_scan`` with the first-order combine
``(a1, x1) . (a2, x2) = (a1 a2, a2 x1 + x2)``, and the state entering the chunk is added as ``A_prefix h_prev``.
With ``SAVE_CKPT`` the state entering each chunk is stored, ``ckpt: (batch, d, nchunks, n)``.

Backward (the adjoint ``lam_s = dLoss/dh_s``)::

    lam_s   = C_t gy_t + a_{s+1} lam_{s+1},          lam_{L-1} = C gy + glast,   gy = gout silu(z) (or gout)
    gx_s = lam_s:  gu_t = sum_n lam_s w_s B_t + D gy_t,   gB_t = sum_{d in group} lam_s w_s u_t,
    gdt_s   = sum_n lam_s (A a_s h_{s-1} + dw/ddt B_t u_t),  gC_t = sum gy_t h_s,
    gA      = sum_{b,s} lam_s (dt_s a_s h_{s-1} + dw/dA B_t u_t),
    gz = gout y dsilu(z),  gdelta = gdt sigmoid(delta + bias) (softplus) or gdt,  gh0 = a_0 lam_0

with ``a_s h_{s-1} = h_s - x_s``. The programs walk the chunks from the last to the first: each recomputes its
chunk's states from the stored state entering it (one associative scan), then runs the adjoint as a reverse
associative scan with the next step's decay ``a_{s+1}`` (1 past the end), carrying ``lam`` across chunks. Per-program
partial sums (gA, fixed gB/gC, gD, gbias) are written per batch element and summed by the caller; input-dependent
gB/gC are summed over a group's channels with ``tl.atomic_add`` into an ``ACC`` buffer (one add per (n, t) when a
channel block lies in one group, the usual case, else one per channel).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from neurodyn.ops.triton_kernels import shared

common = shared()  # combine, rsum (this build's)

Tensor = torch.Tensor



@triton.jit
def _softplus(v):
    # log1p(exp(v)) with Kahan's log1p (accurate where exp(v) is tiny); v itself above 20, as torch
    e = tl.exp(tl.minimum(v, 20.0))
    w = 1.0 + e
    lp = tl.where(w == 1.0, e, tl.log(w) * (e / tl.where(w == 1.0, 1.0, w - 1.0)))
    return tl.where(v > 20.0, v, lp)


@triton.jit
def _sigmoid(v):
    return 1.0 / (1.0 + tl.exp(-v))


@triton.jit
def _poly12(x, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12):
    """``sum_k c_k x^k`` (Horner)."""
    p = c12 * x + c11
    p = (p * x + c10) * x + c9
    p = (p * x + c8) * x + c7
    p = (p * x + c6) * x + c5
    p = (p * x + c4) * x + c3
    p = (p * x + c2) * x + c1
    return p * x + c0


@triton.jit
def _zoh_factors(xz, a):
    """``(phi, psi)`` of ``x = dt lambda >= 0`` with ``a = exp(-x)``: ``phi = (1 - a) / x`` (the ZOH input factor over
    dt) and ``psi = (phi - a) / x`` (its derivative's), by their Taylor series below x = 1/4 (no cancellation; 13
    and 12 terms, float64-exact there; a compiled kernel rounds the literals to float32, about 1e-9 of phi) and
    the closed forms above."""
    small = xz < 0.25
    xs = tl.maximum(xz, 0.25)
    # the series' coefficients, constant term first: (-1)^k / (k+1)!  and  (-1)^k (k+1) / (k+2)!
    phi_series = _poly12(xz, 1.0, -0.5, 0.16666666666666666, -0.041666666666666664, 0.008333333333333333,
        -0.001388888888888889, 0.0001984126984126984, -2.48015873015873e-05, 2.7557319223985893e-06,
        -2.755731922398589e-07, 2.505210838544172e-08, -2.08767569878681e-09, 1.6059043836821613e-10)
    psi_series = _poly12(xz, 0.5, -0.3333333333333333, 0.125, -0.03333333333333333, 0.006944444444444444,
        -0.0011904761904761906, 0.00017361111111111112, -2.2045855379188714e-05, 2.48015873015873e-06,
        -2.505210838544172e-07, 2.296443268665491e-08, -1.9270852604185937e-09, 0.0)
    phi = tl.where(small, phi_series, (1.0 - a) / xs)
    psi = tl.where(small, psi_series, (phi - a) / xs)
    return phi, psi


@triton.jit
def _step(delta_ptr, idx, mask, bias, ACC: tl.constexpr, HAS_BIAS: tl.constexpr, SOFTPLUS: tl.constexpr):
    """(pre-activation, dt) at ``idx``; dt is 0 where ``mask`` is false (so the decay there is 1)."""
    pre = tl.load(delta_ptr + idx, mask=mask, other=0.0).to(ACC)
    if HAS_BIAS:
        pre = pre + bias[:, None]
    dt = pre
    if SOFTPLUS:
        dt = _softplus(pre)
    return pre, tl.where(mask, dt, 0.0)


@triton.jit
def _coef(ptr, fixed, b, offs_d, offs_n, t, mask3, gsize, s_b, s_g, s_n, s_t, ACC: tl.constexpr, VAR: tl.constexpr):
    """B or C on the (BD, BN, BL) tile: the fixed (BD, BN) matrix broadcast, or the input-dependent values (channel
    ``i`` in group ``i // gsize``; strides of batch, group, state, step)."""
    if VAR:
        row = b * s_b + (offs_d // gsize)[:, None, None] * s_g + offs_n[None, :, None] * s_n
        return tl.load(ptr + row + t[None, None, :] * s_t, mask=mask3, other=0.0).to(ACC)
    else:
        return fixed[:, :, None]


@triton.jit
def _rows(dim, n, nchunks, su_b, su_d, sd_b, sd_d, dt_div, BD: tl.constexpr, BN: tl.constexpr, BL: tl.constexpr):
    """A program's batch index ``b`` (64-bit offsets: tensors past 2^31 elements), chunk lanes ``offs_s``, and the
    offsets of its rows: ``bdn`` in (batch, d, n) tensors, ``urow`` in u-like ones (u, z, out and their gradients;
    gdelta too, one per channel), ``drow`` in delta, ``ck_row`` in the checkpoints (chunk 0)."""
    b = tl.program_id(0).to(tl.int64)
    offs_d = tl.program_id(1) * BD + tl.arange(0, BD)
    offs_n = tl.arange(0, BN)
    bdn = b * dim * n + offs_d[:, None] * n + offs_n[None, :]
    urow = b * su_b + offs_d * su_d
    drow = b * sd_b + (offs_d // dt_div) * sd_d
    ck_row = ((b * dim + offs_d) * nchunks)[:, None] * n + offs_n[None, :]
    return b, tl.arange(0, BL), bdn, urow, drow, ck_row


@triton.jit
def _prologue(A_ptr, B_ptr, C_ptr, D_ptr, bias_ptr, b, dim, n, dt_div, sets, sa_s, sa_d, sa_n, sD_s,
              ACC: tl.constexpr, BD: tl.constexpr, BN: tl.constexpr, B_VAR: tl.constexpr, C_VAR: tl.constexpr,
              HAS_D: tl.constexpr, HAS_BIAS: tl.constexpr):
    """A program's channels and constants: ``(first_d, offs_d, offs_n, mask_d, mask_dn, dn, A, bias, D, B, C)``
    (fixed B / C, zeros when input-dependent). A is read at ``(b % sets) sa_s + (i // dt_div) sa_d + n sa_n``, D at
    ``(b % sets) sD_s + i``: (d, n) and (d,) for the selective scan, one decay per head and set for the head scan."""
    first_d = tl.program_id(1) * BD
    offs_d = first_d + tl.arange(0, BD)
    offs_n = tl.arange(0, BN)
    mask_d = offs_d < dim
    mask_dn = mask_d[:, None] & (offs_n < n)[None, :]
    dn = offs_d[:, None] * n + offs_n[None, :]
    A = tl.load(A_ptr + (b % sets) * sa_s + (offs_d // dt_div)[:, None] * sa_d + offs_n[None, :] * sa_n,
                mask=mask_dn, other=0.0).to(ACC)
    bias = tl.full((BD,), 0.0, ACC)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_d, mask=mask_d, other=0.0).to(ACC)
    Dv = tl.full((BD,), 0.0, ACC)
    if HAS_D:
        Dv = tl.load(D_ptr + (b % sets) * sD_s + offs_d, mask=mask_d, other=0.0).to(ACC)
    Bf = tl.full((BD, BN), 0.0, ACC)
    if not B_VAR:
        Bf = tl.load(B_ptr + dn, mask=mask_dn, other=0.0).to(ACC)
    Cf = tl.full((BD, BN), 0.0, ACC)
    if not C_VAR:
        Cf = tl.load(C_ptr + dn, mask=mask_dn, other=0.0).to(ACC)
    return first_d, offs_d, offs_n, mask_d, mask_dn, dn, A, bias, Dv, Bf, Cf


@triton.jit
def _chunk(c, h, u_ptr, delta_ptr, B_ptr, C_ptr, A, bias, Bf, Cf, b, offs_d, offs_n, offs_s, mask_d, mask_dn, urow,
           drow, L, su_t, sd_t, gb_size, sb_b, sb_g, sb_n, sb_t, gc_size, sc_b, sc_g, sc_n, sc_t,
           ACC: tl.constexpr, BL: tl.constexpr, B_VAR: tl.constexpr, C_VAR: tl.constexpr, HAS_BIAS: tl.constexpr,
           SOFTPLUS: tl.constexpr, REVERSE: tl.constexpr, ZOH: tl.constexpr):
    """Chunk ``c`` of the recurrence from the state ``h (BD, BN)`` entering it, as the forward computes it and the
    backward recomputes it: ``(t, m2, m3, idx, u, pre, dt, a, Bt, bu, w, psi, x, hs, Ct)`` with the times ``t (BL,)``,
    the masks of the ``(BD, BL)`` and ``(BD, BN, BL)`` tiles, u's offsets ``idx``, the inputs, the step's
    pre-activation and value, the decay ``a``, ``B_t``, ``B_t u_t``, the input factor ``w`` (with ZOH its
    derivative's factor ``psi``; else ``psi`` is unused), ``x = w B_t u_t``, the states ``hs`` and ``C_t``."""
    s, t = common.steps(c, L, offs_s, BL, REVERSE)
    m2 = mask_d[:, None] & (s < L)[None, :]
    m3 = mask_dn[:, :, None] & (s < L)[None, None, :]
    idx = urow[:, None] + t[None, :] * su_t
    u = tl.load(u_ptr + idx, mask=m2, other=0.0).to(ACC)
    pre, dt = _step(delta_ptr, drow[:, None] + t[None, :] * sd_t, m2, bias, ACC, HAS_BIAS, SOFTPLUS)
    dA = dt[:, None, :] * A[:, :, None]
    a = tl.exp(dA)
    Bt = _coef(B_ptr, Bf, b, offs_d, offs_n, t, m3, gb_size, sb_b, sb_g, sb_n, sb_t, ACC, B_VAR)
    bu = u[:, None, :] * Bt
    w = dt[:, None, :]
    psi = w
    if ZOH:
        phi, psi = _zoh_factors(-dA, a)
        w = w * phi
    x = w * bu
    pa, px = tl.associative_scan((a, x), 2, common.combine)
    hs = px + pa * h[:, :, None]
    Ct = _coef(C_ptr, Cf, b, offs_d, offs_n, t, m3, gc_size, sc_b, sc_g, sc_n, sc_t, ACC, C_VAR)
    return t, m2, m3, idx, u, pre, dt, a, Bt, bu, w, psi, x, hs, Ct


@triton.jit
def _selective_scan_fwd_kernel(
    u_ptr, delta_ptr, A_ptr, B_ptr, C_ptr, D_ptr, z_ptr, bias_ptr, h0_ptr, out_ptr, last_ptr, ckpt_ptr,
    dim, L, n, nchunks, su_b, su_d, su_t, sd_b, sd_d, sd_t, dt_div, sets, sa_s, sa_d, sa_n, sD_s,
    gb_size, sb_b, sb_g, sb_n, sb_t, gc_size, sc_b, sc_g, sc_n, sc_t,
    ACC: tl.constexpr, BD: tl.constexpr, BN: tl.constexpr, BL: tl.constexpr,
    B_VAR: tl.constexpr, C_VAR: tl.constexpr, HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_H0: tl.constexpr, SOFTPLUS: tl.constexpr, REVERSE: tl.constexpr, SAVE_CKPT: tl.constexpr, ZOH: tl.constexpr,
):
    b, offs_s, bdn, urow, drow, ck_row = _rows(dim, n, nchunks, su_b, su_d, sd_b, sd_d, dt_div, BD, BN, BL)
    first_d, offs_d, offs_n, mask_d, mask_dn, dn, A, bias, Dv, Bf, Cf = _prologue(
        A_ptr, B_ptr, C_ptr, D_ptr, bias_ptr, b, dim, n, dt_div, sets, sa_s, sa_d, sa_n, sD_s, ACC, BD, BN, B_VAR,
        C_VAR, HAS_D, HAS_BIAS)
    h = tl.full((BD, BN), 0.0, ACC)
    if HAS_H0:
        h = tl.load(h0_ptr + bdn, mask=mask_dn, other=0.0).to(ACC)
    for c in range(nchunks):
        if SAVE_CKPT:
            tl.store(ckpt_ptr + ck_row + c * n, h, mask=mask_dn)
        t, m2, m3, idx, u, pre, dt, a, Bt, bu, w, psi, x, hs, Ct = _chunk(
            c, h, u_ptr, delta_ptr, B_ptr, C_ptr, A, bias, Bf, Cf, b, offs_d, offs_n, offs_s, mask_d, mask_dn, urow,
            drow, L, su_t, sd_t, gb_size, sb_b, sb_g, sb_n, sb_t, gc_size, sc_b, sc_g, sc_n, sc_t, ACC, BL, B_VAR,
            C_VAR, HAS_BIAS, SOFTPLUS, REVERSE, ZOH)
        y = common.rsum(hs * Ct, 1) + Dv[:, None] * u
        if HAS_Z:
            zz = tl.load(z_ptr + idx, mask=m2, other=0.0).to(ACC)
            y = y * zz * _sigmoid(zz)
        tl.store(out_ptr + idx, y, mask=m2)
        # the state after the chunk (steps past L keep it: their decay is 1 and their input 0)
        h = common.rsum(tl.where((offs_s == BL - 1)[None, None, :], hs, 0.0), 2)
    tl.store(last_ptr + bdn, h, mask=mask_dn)


@triton.jit
def _reduce_coef_grad(gptr, g3, b, offs_d, offs_n, t, mask3, gsize, s_b, s_g, s_n, s_t, first_d,
                      ALIGNED: tl.constexpr):
    """Add the (BD, BN, BL) per-channel terms of an input-dependent B or C gradient into its buffer (B's layout)."""
    if ALIGNED:  # the whole channel block lies in one group: sum over it, one add per (n, t)
        row = b * s_b + (first_d // gsize) * s_g + offs_n * s_n
        m = common.rsum(mask3.to(tl.int32), 0) > 0
        tl.atomic_add(gptr + row[:, None] + t[None, :] * s_t, common.rsum(g3, 0), mask=m)
    else:
        row = b * s_b + (offs_d // gsize)[:, None, None] * s_g + offs_n[None, :, None] * s_n
        tl.atomic_add(gptr + row + t[None, None, :] * s_t, g3, mask=mask3)


@triton.jit
def _selective_scan_bwd_kernel(
    u_ptr, delta_ptr, A_ptr, B_ptr, C_ptr, D_ptr, z_ptr, bias_ptr, h0_ptr, ckpt_ptr, gout_ptr, glast_ptr,
    gu_ptr, gdelta_ptr, gz_ptr, gh0_ptr, gA_ptr, gB_ptr, gC_ptr, gD_ptr, gbias_ptr,
    dim, L, n, nchunks, su_b, su_d, su_t, sd_b, sd_d, sd_t, dt_div, sets, sa_s, sa_d, sa_n, sD_s,
    gb_size, sb_b, sb_g, sb_n, sb_t, gc_size, sc_b, sc_g, sc_n, sc_t,
    ACC: tl.constexpr, BD: tl.constexpr, BN: tl.constexpr, BL: tl.constexpr,
    B_VAR: tl.constexpr, C_VAR: tl.constexpr, B_ALIGNED: tl.constexpr, C_ALIGNED: tl.constexpr,
    HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_H0: tl.constexpr,
    HAS_GLAST: tl.constexpr, SOFTPLUS: tl.constexpr, REVERSE: tl.constexpr, ZOH: tl.constexpr,
):
    b, offs_s, bdn, urow, drow, ck_row = _rows(dim, n, nchunks, su_b, su_d, sd_b, sd_d, dt_div, BD, BN, BL)
    first_d, offs_d, offs_n, mask_d, mask_dn, dn, A, bias, Dv, Bf, Cf = _prologue(
        A_ptr, B_ptr, C_ptr, D_ptr, bias_ptr, b, dim, n, dt_div, sets, sa_s, sa_d, sa_n, sD_s, ACC, BD, BN, B_VAR,
        C_VAR, HAS_D, HAS_BIAS)
    lam = tl.full((BD, BN), 0.0, ACC)  # lam entering the chunk from its end: lam_{s_end + 1}
    if HAS_GLAST:
        lam = tl.load(glast_ptr + bdn, mask=mask_dn, other=0.0).to(ACC)
    gA = tl.full((BD, BN), 0.0, ACC)
    gBf = tl.full((BD, BN), 0.0, ACC)
    gCf = tl.full((BD, BN), 0.0, ACC)
    gD = tl.full((BD,), 0.0, ACC)
    gbias = tl.full((BD,), 0.0, ACC)
    for i in range(nchunks):
        c = nchunks - 1 - i
        h = tl.load(ckpt_ptr + ck_row + c * n, mask=mask_dn, other=0.0).to(ACC)
        # the chunk's states, recomputed from the state entering it
        t, m2, m3, idx, u, pre, dt, a, Bt, bu, w, psi, x, hs, Ct = _chunk(
            c, h, u_ptr, delta_ptr, B_ptr, C_ptr, A, bias, Bf, Cf, b, offs_d, offs_n, offs_s, mask_d, mask_dn, urow,
            drow, L, su_t, sd_t, gb_size, sb_b, sb_g, sb_n, sb_t, gc_size, sc_b, sc_g, sc_n, sc_t, ACC, BL, B_VAR,
            C_VAR, HAS_BIAS, SOFTPLUS, REVERSE, ZOH)
        gy = tl.load(gout_ptr + idx, mask=m2, other=0.0).to(ACC)
        if HAS_Z:
            y = common.rsum(hs * Ct, 1) + Dv[:, None] * u
            zz = tl.load(z_ptr + idx, mask=m2, other=0.0).to(ACC)
            sg = _sigmoid(zz)
            tl.store(gz_ptr + idx, gy * y * sg * (1.0 + zz * (1.0 - sg)), mask=m2)
            gy = gy * zz * sg
        # the adjoint: reverse scan with the next step's decay (1 past the end of the sequence)
        s1, t1 = common.steps(c, L, offs_s + 1, BL, REVERSE)
        m2n = mask_d[:, None] & (s1 < L)[None, :]
        pre1, dt1 = _step(delta_ptr, drow[:, None] + t1[None, :] * sd_t, m2n, bias, ACC, HAS_BIAS, SOFTPLUS)
        a1 = tl.exp(dt1[:, None, :] * A[:, :, None])
        qa, qx = tl.associative_scan((a1, gy[:, None, :] * Ct), 2, common.combine, reverse=True)
        lams = qx + qa * lam[:, :, None]
        lam = common.rsum(tl.where((offs_s == 0)[None, None, :], lams, 0.0), 2)
        lw = lams * w
        gu = common.rsum(lw * Bt, 1) + Dv[:, None] * gy
        ah = hs - x  # a_s h_{s-1}
        if ZOH:  # dw/ddt = a, dw/dA = dt^2 psi
            gdt = common.rsum(lams * (ah * A[:, :, None] + bu * a), 1)
            gA += common.rsum(lams * dt[:, None, :] * (ah + bu * dt[:, None, :] * psi), 2)
        else:  # w = dt
            gdt = common.rsum(lams * (ah * A[:, :, None] + bu), 1)
            gA += common.rsum(ah * lw, 2)
        if SOFTPLUS:
            gdt = gdt * _sigmoid(pre)
        gdt = tl.where(m2, gdt, 0.0)
        tl.store(gu_ptr + idx, gu, mask=m2)
        tl.store(gdelta_ptr + idx, gdt, mask=m2)
        gbias += common.rsum(gdt, 1)
        gD += common.rsum(gy * u, 1)
        gB3 = lw * u[:, None, :]
        if B_VAR:
            _reduce_coef_grad(gB_ptr, gB3, b, offs_d, offs_n, t, m3, gb_size, sb_b, sb_g, sb_n, sb_t, first_d,
                              B_ALIGNED)
        else:
            gBf += common.rsum(gB3, 2)
        gC3 = gy[:, None, :] * hs
        if C_VAR:
            _reduce_coef_grad(gC_ptr, gC3, b, offs_d, offs_n, t, m3, gc_size, sc_b, sc_g, sc_n, sc_t, first_d,
                              C_ALIGNED)
        else:
            gCf += common.rsum(gC3, 2)
    if HAS_H0:  # gh0 = a_0 lam_0
        s0, t0 = common.steps(0, L, offs_s, BL, REVERSE)
        first = (s0 == 0)[None, :]
        pre0, dt0 = _step(delta_ptr, drow[:, None] + t0[None, :] * sd_t, mask_d[:, None] & first, bias, ACC,
                          HAS_BIAS, SOFTPLUS)
        dt0 = common.rsum(dt0, 1)
        tl.store(gh0_ptr + bdn, tl.exp(dt0[:, None] * A) * lam, mask=mask_dn)
    tl.store(gA_ptr + bdn, gA, mask=mask_dn)
    if not B_VAR:
        tl.store(gB_ptr + bdn, gBf, mask=mask_dn)
    if not C_VAR:
        tl.store(gC_ptr + bdn, gCf, mask=mask_dn)
    tl.store(gD_ptr + b * dim + offs_d, gD, mask=mask_d)
    tl.store(gbias_ptr + b * dim + offs_d, gbias, mask=mask_d)


# ---------------------------------------------------------------------------------------------------------------
# launchers (arguments prepared by neurodyn.ops.triton_ops: contiguous, B/C 2-D or 4-D)


def _acc(*tensors) -> tl.dtype:
    return tl.float64 if any(t is not None and t.dtype == torch.float64 for t in tensors) else tl.float32


def _warps(bd: int, bn: int, bl: int) -> int:
    """4 warps up to 2048-element tiles (ptxas for sm_90, no GPU run: forward 154 registers, backward 254, no spills
    at 4 x 16 x 32), 8 above."""
    return 8 if bd * bn * bl > 2048 else 4


def _coef_layout(W: Tensor, dim: int) -> tuple[int, ...]:
    """(channels per group, strides of batch, group, state, step) of a ``(batch, G, n, L)`` coefficient; unused
    placeholders for a fixed ``(d, n)`` one."""
    if W.dim() != 4:
        return (1, 0, 0, 0, 0)
    _, G, n, L = W.shape
    return (dim // G, G * n * L, n * L, L, 1)


def _standard_layout(u, A, B, C) -> tuple[int, ...]:
    """The kernels' layout arguments for :func:`neurodyn.ops.selective_scan`'s contiguous tensors (see the kernels'
    signature: u-like and delta strides of batch, channel, step; dt_div; A's sets and strides; D's set stride; B's and
    C's group size and strides)."""
    batch, dim, L = u.shape
    n = A.shape[1]
    return (dim, L, n, dim * L, L, 1, dim * L, L, 1, 1, 1, 0, n, 1, 0, *_coef_layout(B, dim), *_coef_layout(C, dim))


def _head_layout(u, dt, A, B) -> tuple[int, ...]:
    """The layout arguments for :func:`neurodyn.ops.head_scan`'s time-major tensors, batch and sets folded into the
    programs' batch index: ``u (batch, S, L, H P)`` -> channels ``H P`` with step stride ``H P``; ``dt (batch, S, L,
    H)`` read at the channel's head (``dt_div = P``); ``A (S, H)`` one decay per head, the same for every state; ``D
    (S, H P)``; ``B, C (batch, S, L, G, N)``, channel ``i`` in group ``i // (P H / G)``."""
    batch, S, L, HP = u.shape
    H = dt.shape[3]
    G, N = B.shape[3:]
    P = HP // H
    return (HP, L, N, L * HP, 1, HP, L * H, 1, H, P, S, H, 1, 0, HP,
            P * (H // G), L * G * N, N, 1, G * N, P * (H // G), L * G * N, N, 1, G * N)


def _launch_fwd(layout, batch, u, delta, A, B, C, D, z, bias, h0, softplus, reverse, save_ckpt, block_l, block_d,
                zoh, var_b, var_c):
    dim, L, n = layout[:3]
    acc = _acc(u, delta, A, B, C, D, z, bias, h0)
    cdt = torch.float64 if acc == tl.float64 else torch.float32
    nchunks = triton.cdiv(L, block_l)
    out = torch.empty_like(u)
    last = u.new_empty(batch, dim, n, dtype=cdt)
    ckpt = u.new_empty(batch, dim, nchunks, n, dtype=cdt) if save_ckpt else u.new_empty(0, dtype=cdt)
    bn = triton.next_power_of_2(n)
    _selective_scan_fwd_kernel[(batch, triton.cdiv(dim, block_d))](
        u, delta, A, B, C, u if D is None else D, u if z is None else z, u if bias is None else bias,
        u if h0 is None else h0, out, last, ckpt if save_ckpt else last, dim, L, n, nchunks, *layout[3:],
        ACC=acc, BD=block_d, BN=bn, BL=block_l, B_VAR=var_b, C_VAR=var_c, HAS_D=D is not None,
        HAS_Z=z is not None, HAS_BIAS=bias is not None, HAS_H0=h0 is not None, SOFTPLUS=softplus, REVERSE=reverse,
        SAVE_CKPT=save_ckpt, ZOH=zoh, num_warps=_warps(block_d, bn, block_l),
    )
    return out, last, ckpt


def _launch_bwd(layout, batch, u, delta, A, B, C, D, z, bias, h0, ckpt, gout, glast, softplus, reverse, block_l,
                block_d, zoh, var_b, var_c, per_head=False):
    dim, L, n = layout[:3]
    gb_size, gc_size = layout[15], layout[20]
    acc = _acc(u, delta, A, B, C, D, z, bias, h0)
    cdt = torch.float64 if acc == tl.float64 else torch.float32
    bn = triton.next_power_of_2(n)
    new = lambda *shape: u.new_empty(*shape, dtype=cdt)  # noqa: E731
    # gdelta: one per channel, in u's layout (delta's dtype; for heads a partial sum over a head's channels: cdt)
    gu, gdelta = torch.empty_like(u), u.new_empty(u.shape, dtype=cdt if per_head else delta.dtype)
    gz = torch.empty_like(z) if z is not None else new(0)  # (empty outputs: distinct tensors, no output aliases)
    gh0 = new(batch, dim, n) if h0 is not None else new(0)
    gA = new(batch, dim, n)
    coef = lambda W, var: u.new_zeros(W.shape, dtype=cdt) if var else new(batch, dim, n)  # noqa: E731
    gB, gC = coef(B, var_b), coef(C, var_c)
    gD, gbias = new(batch, dim), new(batch, dim)
    _selective_scan_bwd_kernel[(batch, triton.cdiv(dim, block_d))](
        u, delta, A, B, C, u if D is None else D, u if z is None else z, u if bias is None else bias,
        u if h0 is None else h0, ckpt, gout, gout if glast is None else glast,
        gu, gdelta, gu if z is None else gz, gA if h0 is None else gh0, gA, gB, gC, gD, gbias,
        dim, L, n, ckpt.shape[2], *layout[3:],
        ACC=acc, BD=block_d, BN=bn, BL=block_l, B_VAR=var_b, C_VAR=var_c,
        B_ALIGNED=gb_size % block_d == 0, C_ALIGNED=gc_size % block_d == 0, HAS_D=D is not None, HAS_Z=z is not None,
        HAS_BIAS=bias is not None, HAS_H0=h0 is not None, HAS_GLAST=glast is not None, SOFTPLUS=softplus,
        REVERSE=reverse, ZOH=zoh, num_warps=_warps(block_d, bn, block_l),
    )
    return gu, gdelta, gz, gh0, gA, gB, gC, gD, gbias


def fwd(u, delta, A, B, C, D, z, bias, h0, softplus, reverse, save_ckpt, block_l, block_d, zoh):
    """The selective scan: ``(out (batch, d, L) in u's dtype, last (batch, d, n), ckpt (batch, d, nchunks, n) or
    empty)``; last and ckpt in the accumulation dtype."""
    return _launch_fwd(_standard_layout(u, A, B, C), u.shape[0], u, delta, A, B, C, D, z, bias, h0, softplus,
                       reverse, save_ckpt, block_l, block_d, zoh, B.dim() == 4, C.dim() == 4)


def bwd(u, delta, A, B, C, D, z, bias, h0, ckpt, gout, glast, softplus, reverse, block_l, block_d, zoh):
    """Returns ``(gu, gdelta, gz, gh0, gA, gB, gC, gD, gbias)``: gu, gdelta, gz like u/delta/z; gh0 (batch, d, n);
    gA (batch, d, n), fixed gB/gC (batch, d, n), gD and gbias (batch, d) per batch element (to be summed over it);
    input-dependent gB/gC like B/C; everything but gu/gdelta/gz in the accumulation dtype, empty when absent."""
    return _launch_bwd(_standard_layout(u, A, B, C), u.shape[0], u, delta, A, B, C, D, z, bias, h0, ckpt, gout,
                       glast, softplus, reverse, block_l, block_d, zoh, B.dim() == 4, C.dim() == 4)


def head_fwd(u, dt, A, B, C, D, save_ckpt, block_l, block_d):
    """The multi-head scan in its time-major layout (:func:`_head_layout`): ``(y like u, ckpt (batch S, H P, nchunks,
    N) or empty)``."""
    batch, S = u.shape[:2]
    out, _, ckpt = _launch_fwd(_head_layout(u, dt, A, B), batch * S, u, dt, A, B, C, D, None, None, None, False,
                               False, save_ckpt, block_l, block_d, False, True, True)
    return out, ckpt


def head_bwd(u, dt, A, B, C, D, ckpt, gy, block_l, block_d):
    """``(gu like u, gdt per channel of u's shape (to be summed over each head's P channels), gA (batch S, H P, N),
    gB, gC like B, C, gD (batch S, H P))``: all but gu in the accumulation dtype, gA and gD per batch element and
    set."""
    batch, S = u.shape[:2]
    gu, gdt, _, _, gA, gB, gC, gD, _ = _launch_bwd(
        _head_layout(u, dt, A, B), batch * S, u, dt, A, B, C, D, None, None, None, ckpt, gy, None, False, False,
        block_l, block_d, False, True, True, per_head=True)
    return gu, gdt, gA, gB, gC, gD
