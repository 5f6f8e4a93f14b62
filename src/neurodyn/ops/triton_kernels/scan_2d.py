"""Triton kernels of GeoMaNO's 2-D selective scan, one direction in its own frame (:mod:`neurodyn.ops.scan_2d`).
Loaded by :func:`neurodyn.ops.triton_kernels.load` only; the operators are in :mod:`neurodyn.ops.triton_ops`.

Per channel and state, with ``a = exp(dt A)``, ``bx = dt B x`` (dt final: softplus and bias are the caller's)::

    g[i, j] = a[i, j] g[i, j-1] + bx[i, j]          (row scan)
    h[i, j] = a[i, j] h[i-1, j] + g[i, j]           (column scan)
    y[i, j] = sum_n C (h - R bx) + D x               FORM 0 ("cbx")
            = sum_n C h - sum_n R bx + D x           FORM 1 ("eq9")
            = sum_n C (h - R x) + D x                FORM 2 ("alg2")

Layout: ``x, dt, y: (batch, d, H, W)``; ``A, R: (d, n)``; ``B, C: (batch, n, H, W)``; ``D: (d,)``; contiguous, one
dtype (float32 or float64, the accumulation dtype).

Forward: one program per (batch element, block of ``BD`` channels) walks the rows; a row is one ``(BD, BN, BW)``
tile (``BW >= W``: the whole row), its row scan a ``tl.associative_scan`` along W, and the column states ``h`` of
the whole row stay in registers from one row to the next. With ``SAVE_CKPT`` the states entering every block of
``ROWS`` rows are stored, ``ckpt: (batch, d, ceil(H / ROWS), n, W)``.

Backward, rows from the last to the first: row i's states are recomputed from the checkpoint of its block (up to
``ROWS - 1`` row steps, each with its row scan), then the two adjoints::

    mu[i, j] = dL/dh = C gy + a[i+1, j] mu[i+1, j]          (carried from row to row)
    nu[i, j] = dL/dg = mu + a[i, j+1] nu[i, j+1]             (a reverse associative scan along the row)
    dL/dbx   = nu - R C gy (cbx) / - R gy (eq9) / 0 (alg2);  a dL/da = mu (h - g) + nu (g - bx)

(``a h[i-1] = h - g`` and ``a g[j-1] = g - bx``: nothing shifted is needed), from which ``gdt = sum_n (A a dL/da +
B x dL/dbx)``, ``gx = sum_n dt B dL/dbx + D gy`` (alg2: ``- sum_n R C gy``), ``gA, gD, gR`` (per batch element,
summed by the caller) and ``gB, gC`` (summed over the channel blocks with ``tl.atomic_add``).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from neurodyn.ops.triton_kernels import shared

common = shared()  # combine, rsum (this build's)



@triton.jit
def _width(i, H, W):
    """The number of valid columns of row ``i``: W inside the grid, 0 past its last row."""
    return tl.where(i < H, W, 0)


@triton.jit
def _row(x_ptr, dt_ptr, B_ptr, A, b, i, offs_d, offs_n, offs_w, mask_d, mask_n, dim, n, H, W):
    """Row ``i``'s inputs and row scan: ``(x, dt, B, a, bx, g)``; rows and columns outside the grid give a = 1,
    bx = 0."""
    mw = offs_w < _width(i, H, W)
    m2 = mask_d[:, None] & mw[None, :]
    idx = ((b * dim + offs_d) * H + i)[:, None] * W + offs_w[None, :]
    x = tl.load(x_ptr + idx, mask=m2, other=0.0)
    dt = tl.load(dt_ptr + idx, mask=m2, other=0.0)
    Bi = tl.load(B_ptr + ((b * n + offs_n) * H + i)[:, None] * W + offs_w[None, :],
                 mask=mask_n[:, None] & mw[None, :], other=0.0)
    # (x, dt, B in the accumulation dtype: the operator's inputs share one float dtype)
    a = tl.exp(dt[:, None, :] * A[:, :, None])
    bx = (dt * x)[:, None, :] * Bi[None, :, :]
    pa, g = tl.associative_scan((a, bx), 2, common.combine)
    return x, dt, Bi, a, bx, g


@triton.jit
def _setup(A_ptr, R_ptr, D_ptr, dim, n, BD: tl.constexpr, BN: tl.constexpr, BW: tl.constexpr, ACC: tl.constexpr,
           HAS_D: tl.constexpr):
    offs_d = tl.program_id(1) * BD + tl.arange(0, BD)
    offs_n = tl.arange(0, BN)
    mask_d = offs_d < dim
    mask_n = offs_n < n
    mask_dn = mask_d[:, None] & mask_n[None, :]
    A = tl.load(A_ptr + offs_d[:, None] * n + offs_n[None, :], mask=mask_dn, other=0.0).to(ACC)
    R = tl.load(R_ptr + offs_d[:, None] * n + offs_n[None, :], mask=mask_dn, other=0.0).to(ACC)
    Dv = tl.full((BD,), 0.0, ACC)
    if HAS_D:
        Dv = tl.load(D_ptr + offs_d, mask=mask_d, other=0.0).to(ACC)
    return offs_d, offs_n, tl.arange(0, BW), mask_d, mask_n, mask_dn, A, R, Dv


@triton.jit
def _row_C(C_ptr, b, i, offs_n, offs_w, mask_n, n, H, W):
    m = mask_n[:, None] & (offs_w < _width(i, H, W))[None, :]
    return tl.load(C_ptr + ((b * n + offs_n) * H + i)[:, None] * W + offs_w[None, :], mask=m, other=0.0)


@triton.jit
def _scan2d_fwd_kernel(x_ptr, dt_ptr, A_ptr, B_ptr, C_ptr, D_ptr, R_ptr, y_ptr, ckpt_ptr, dim, n, H, W, nblk,
                       ACC: tl.constexpr, BD: tl.constexpr, BN: tl.constexpr, BW: tl.constexpr, ROWS: tl.constexpr,
                       FORM: tl.constexpr, HAS_D: tl.constexpr, SAVE_CKPT: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    offs_d, offs_n, offs_w, mask_d, mask_n, mask_dn, A, R, Dv = _setup(A_ptr, R_ptr, D_ptr, dim, n, BD, BN, BW, ACC,
                                                                       HAS_D)
    h = tl.full((BD, BN, BW), 0.0, ACC)
    ck = (((b * dim + offs_d) * nblk)[:, None] * n + offs_n[None, :])[:, :, None] * W + offs_w[None, None, :]
    m3 = mask_dn[:, :, None] & (offs_w < W)[None, None, :]
    for i in range(H):
        if SAVE_CKPT:
            if i % ROWS == 0:
                tl.store(ckpt_ptr + ck + (i // ROWS) * n * W, h, mask=m3)
        x, dt, Bi, a, bx, g = _row(x_ptr, dt_ptr, B_ptr, A, b, i, offs_d, offs_n, offs_w, mask_d, mask_n, dim, n,
                                   H, W)
        h = a * h + g
        Ci = _row_C(C_ptr, b, i, offs_n, offs_w, mask_n, n, H, W)
        if FORM == 0:
            y = common.rsum(Ci[None, :, :] * (h - R[:, :, None] * bx), 1)
        elif FORM == 1:
            y = common.rsum(Ci[None, :, :] * h - R[:, :, None] * bx, 1)
        else:
            y = common.rsum(Ci[None, :, :] * (h - R[:, :, None] * x[:, None, :]), 1)
        y += Dv[:, None] * x
        idx = ((b * dim + offs_d) * H + i)[:, None] * W + offs_w[None, :]
        tl.store(y_ptr + idx, y, mask=mask_d[:, None] & (offs_w < W)[None, :])


@triton.jit
def _scan2d_bwd_kernel(x_ptr, dt_ptr, A_ptr, B_ptr, C_ptr, D_ptr, R_ptr, ckpt_ptr, gy_ptr,
                       gx_ptr, gdt_ptr, gA_ptr, gB_ptr, gC_ptr, gD_ptr, gR_ptr, dim, n, H, W, nblk,
                       ACC: tl.constexpr, BD: tl.constexpr, BN: tl.constexpr, BW: tl.constexpr, ROWS: tl.constexpr,
                       FORM: tl.constexpr, HAS_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    offs_d, offs_n, offs_w, mask_d, mask_n, mask_dn, A, R, Dv = _setup(A_ptr, R_ptr, D_ptr, dim, n, BD, BN, BW, ACC,
                                                                       HAS_D)
    ck = (((b * dim + offs_d) * nblk)[:, None] * n + offs_n[None, :])[:, :, None] * W + offs_w[None, None, :]
    m3 = mask_dn[:, :, None] & (offs_w < W)[None, None, :]
    A3 = A[:, :, None]
    R3 = R[:, :, None]
    mu_c = tl.full((BD, BN, BW), 0.0, ACC)  # a[i+1] mu[i+1], the column adjoint entering row i from below
    gA = tl.full((BD, BN), 0.0, ACC)
    gR = tl.full((BD, BN), 0.0, ACC)
    gD = tl.full((BD,), 0.0, ACC)
    for jb in range(nblk):
        blk = nblk - 1 - jb
        r0 = blk * ROWS
        for jj in range(ROWS):
            i = r0 + ROWS - 1 - jj
            # h[i-1]: the block's checkpoint carried over its rows before i
            hp = tl.load(ckpt_ptr + ck + blk * n * W, mask=m3, other=0.0)
            for r in range(r0, i):
                xr, dtr, Br, ar, bxr, gr = _row(x_ptr, dt_ptr, B_ptr, A, b, r, offs_d, offs_n, offs_w, mask_d,
                                                mask_n, dim, n, H, W)
                hp = ar * hp + gr
            x, dt, Bi, a, bx, g = _row(x_ptr, dt_ptr, B_ptr, A, b, i, offs_d, offs_n, offs_w, mask_d, mask_n, dim,
                                       n, H, W)
            ah = a * hp  # a h[i-1]
            h = ah + g
            Ci = _row_C(C_ptr, b, i, offs_n, offs_w, mask_n, n, H, W)
            mw = offs_w < _width(i, H, W)
            m2 = mask_d[:, None] & mw[None, :]
            idx = ((b * dim + offs_d) * H + i)[:, None] * W + offs_w[None, :]
            gyr = tl.load(gy_ptr + idx, mask=m2, other=0.0)
            cg = Ci[None, :, :] * gyr[:, None, :]
            mu = cg + mu_c
            # the row adjoint: reverse scan with the next column's decay (1 past the row's end)
            mn = mask_d[:, None] & (offs_w + 1 < _width(i, H, W))[None, :]
            dtn = tl.load(dt_ptr + idx + 1, mask=mn, other=0.0)
            an = tl.exp(dtn[:, None, :] * A3)
            pa, nu = tl.associative_scan((an, mu), 2, common.combine, reverse=True)
            if FORM == 0:
                gbx = nu - R3 * cg
                gR -= common.rsum(cg * bx, 2)
                gc3 = h - R3 * bx
            elif FORM == 1:
                gbx = nu - R3 * gyr[:, None, :]
                gR -= common.rsum(gyr[:, None, :] * bx, 2)
                gc3 = h
            else:
                gbx = nu
                gR -= common.rsum(cg * x[:, None, :], 2)
                gc3 = h - R3 * x[:, None, :]
            ada = mu * ah + nu * (g - bx)  # a dL/da
            gdt = common.rsum(A3 * ada + x[:, None, :] * Bi[None, :, :] * gbx, 1)
            gx = common.rsum(gbx * dt[:, None, :] * Bi[None, :, :], 1) + Dv[:, None] * gyr
            if FORM == 2:
                gx -= common.rsum(R3 * cg, 1)
            gA += common.rsum(ada * dt[:, None, :], 2)
            gD += common.rsum(gyr * x, 1)
            tl.store(gx_ptr + idx, gx, mask=m2)
            tl.store(gdt_ptr + idx, gdt, mask=m2)
            mnw = mask_n[:, None] & mw[None, :]
            row = ((b * n + offs_n) * H + i)[:, None] * W + offs_w[None, :]
            tl.atomic_add(gB_ptr + row, common.rsum(gbx * (dt * x)[:, None, :], 0), mask=mnw)
            tl.atomic_add(gC_ptr + row, common.rsum(gc3 * gyr[:, None, :], 0), mask=mnw)
            mu_c = a * mu
    bdn = (b * dim + offs_d)[:, None] * n + offs_n[None, :]
    tl.store(gA_ptr + bdn, gA, mask=mask_dn)
    tl.store(gR_ptr + bdn, gR, mask=mask_dn)
    tl.store(gD_ptr + b * dim + offs_d, gD, mask=mask_d)


# ---------------------------------------------------------------------------------------------------------------
# launchers (arguments prepared by neurodyn.ops.triton_ops: contiguous, one floating dtype)


def _acc(x):
    return tl.float64 if x.dtype == torch.float64 else tl.float32


def _warps(bd: int, bn: int, bw: int) -> int:
    """At most 8 tile elements per thread (ptxas for sm_90: the backward spills at 16): 4 to 8 warps."""
    return max(4, min(8, bd * bn * bw // 256))


def fwd(x, dt, A, B, C, D, R, form, save_ckpt, rows, block_d):
    """``(y (batch, d, H, W), ckpt (batch, d, ceil(H / rows), n, W) or empty)``."""
    batch, dim, H, W = x.shape
    n = A.shape[1]
    nblk = triton.cdiv(H, rows)
    y = torch.empty_like(x)
    ckpt = x.new_empty(batch, dim, nblk, n, W) if save_ckpt else x.new_empty(0)
    _scan2d_fwd_kernel[(batch, triton.cdiv(dim, block_d))](
        x, dt, A, B, C, x if D is None else D, R, y, ckpt if save_ckpt else y, dim, n, H, W, nblk, ACC=_acc(x),
        BD=block_d, BN=triton.next_power_of_2(n), BW=triton.next_power_of_2(W), ROWS=rows, FORM=form,
        HAS_D=D is not None, SAVE_CKPT=save_ckpt, num_warps=_warps(block_d, triton.next_power_of_2(n),
                                                                   triton.next_power_of_2(W)))
    return y, ckpt


def bwd(x, dt, A, B, C, D, R, form, ckpt, gy, rows, block_d):
    """``(gx, gdt, gA (batch, d, n), gB, gC, gD (batch, d), gR (batch, d, n))``; gA, gD, gR per batch element."""
    batch, dim, H, W = x.shape
    n = A.shape[1]
    gx, gdt = torch.empty_like(x), torch.empty_like(x)
    gA, gR = x.new_empty(batch, dim, n), x.new_empty(batch, dim, n)
    gB, gC = torch.zeros_like(B), torch.zeros_like(C)
    gD = x.new_empty(batch, dim)
    _scan2d_bwd_kernel[(batch, triton.cdiv(dim, block_d))](
        x, dt, A, B, C, x if D is None else D, R, ckpt, gy, gx, gdt, gA, gB, gC, gD, gR, dim, n, H, W,
        ckpt.shape[2], ACC=_acc(x), BD=block_d, BN=triton.next_power_of_2(n), BW=triton.next_power_of_2(W),
        ROWS=rows, FORM=form, HAS_D=D is not None, num_warps=_warps(block_d, triton.next_power_of_2(n),
                                                                    triton.next_power_of_2(W)))
    return gx, gdt, gA, gB, gC, gD, gR
