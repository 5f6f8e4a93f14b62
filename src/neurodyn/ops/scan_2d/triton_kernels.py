"""Triton kernels of GeoMaNO's 2-D selective scan (:mod:`neurodyn.ops.scan_2d`), every direction in one launch.
Loaded by :func:`neurodyn.ops.triton_loader.load` only; the operator is in :mod:`neurodyn.ops.scan_2d.triton_op`.

Per direction ``k`` (in its frame: frame row ``p``, frame column ``q``), channel and state, with
``dt = softplus?(delta + bias)``, ``a = exp(dt A) = 2^(dt A log2 e)``, ``bx = dt B x``::

    g[p, q] = a[p, q] g[p, q-1] + bx[p, q]          (row scan, along q)
    h[p, q] = a[p, q] h[p-1, q] + g[p, q]           (column scan, carried from row to row)
    y[p, q] = sum_n C (h - R bx) + D x               FORM 0 ("cbx")
            = sum_n C h - sum_n R bx + D x           FORM 1 ("eq9")
            = sum_n C (h - R x) + D x                FORM 2 ("alg2")

Frames by strides, not copies: direction ``k`` is a row ``(transpose, flip rows, flip columns)`` of the int32 table
``spec (K, 3)``; frame cell ``(p, q)`` is grid cell ``(p', q')`` (``(q', p')`` when transposed) with ``p' = P-1-p``
when rows are flipped, ``q' = Q-1-q`` when columns are (``P, Q`` = ``H, W``, or ``W, H`` when transposed). Every
tensor is read through its own strides: ``x (batch, d, H, W)`` (any strides: the model's permuted view), ``delta``
``(batch, d, H, W)`` or per direction ``(batch, K, d, H, W)`` (stride 0 along K when shared), ``B, C`` likewise with
``n`` in place of ``d``; ``A, R (K, d, n)``, ``D, bias (K, d)`` contiguous. Inputs of any float dtype are converted to
the accumulation dtype ``ACC`` (float32; float64 when an input is) as they are loaded; softplus and bias are applied
in the kernel. Output ``y (batch, K, d, H, W)`` in ACC (the caller sums the directions when it merges them).

Forward (:func:`_s2_fwd_kernel`; built like the 1-D scans, :mod:`neurodyn.ops.selective_scan.triton_kernels`).
Programs: ``(batch x K, channel blocks x state blocks, row blocks)``, one warp each
(:func:`neurodyn.ops.scan_2d.triton_op.scan2d_fwd_tile`). A frame row is a ``(BD, LANES, T)`` register tile: each
thread holds ``T`` consecutive frame columns of one channel, ``LANES`` threads cover the row (``LANES T = BQ``), the
other lanes hold further channels. The ``BN`` states of a program are an unrolled loop; their row tiles ``h`` stay in
registers from one row to the next (no state round-trips through memory). Per row the program loads ``x`` and
``delta`` and computes ``dt`` (softplus and bias inside), ``dt x`` and each thread's sum of ``dt`` once for all its
states; per state it computes ``a = exp2(dt A log2 e)`` and ``bx`` on the tile, the row scan as the 1-D scans do (each
thread's total input by the in-thread recurrence from 0, its total decay ``exp2(A log2 e sum dt)``, the totals scanned
across the lanes: Kogge-Stone on shuffles), then walks its columns once: ``g = a g + bx``, ``h = a h + g``,
``y += C (h - R bx)`` (or the form's term) in registers. B and C of state ``s`` are read at the constant offset
``s SB_N`` from their row's addresses (the state strides are compile-time constants). With several state blocks
(``NB``) y is their sum, added with ``tl.atomic_add`` into a zeroed buffer (``D x`` is block 0's).

With several row blocks per direction (more programs at once when batch x K x channel blocks are few) the forward
takes three launches, each over every direction:

1. ``PHASE 0``: each block scanned from a zero state, its last row's states ``e_k`` and the column sums of its steps
   ``S_k[q] = sum_p dt[p, q]`` stored (``st (batch, K, d, nblk, n, BQ)``, ``ds (batch, K, d, nblk, BQ)``);
2. the carry pass (:func:`_s2_carry_kernel`): ``H_0 = 0, H_{k+1} = exp(A S_k) H_k + e_k`` (the decay over a block
   is ``prod_p a = exp(A sum_p dt)``), ``H_k`` written over ``e_k``;
3. ``PHASE 1``: each block scanned again from ``H_k``, writing y, and (``SAVE_CKPT``) the states entering every
   segment of ``CS`` rows and leaving the last, ``ckpt (batch, K, d, nseg + 1, n, BQ)``.

With one block per direction, only step 3 runs (from a zero state).

Backward (:func:`_s2_bwd_kernel`, the previous design: a row is one ``(BD, BN, BQ)`` tile, its row scans
``tl.associative_scan`` along q, the sums over the states reductions across threads). Programs ``(batch x K,
channel blocks of BD x state blocks of BN, row blocks)`` (the states split into ``NB`` blocks when a row of them does
not fit one program's tile: gx and gdelta are then sums of the blocks' parts). A program walks its row block in
segments of ``SEG`` rows from the bottom.

Backward (the adjoints ``mu = dL/dh``, ``nu = dL/dg``)::

    mu[p, q] = C gy + a[p+1, q] mu[p+1, q]                (carried from row to row, upwards)
    nu[p, q] = mu + a[p, q+1] nu[p, q+1]                   (a reverse associative scan along the row)
    dL/dbx   = nu - R C gy (cbx) / - R gy (eq9) / nu (alg2);  a dL/da = mu a h[p-1] + nu (g - bx)

(``a g[p, q-1] = g - bx``), from which ``gdt = sum_n (A a dL/da + B x dL/dbx)``, ``gx = sum_n dt B dL/dbx + D gy``
(alg2: ``- sum_n R C gy``), ``gdelta = gdt sigmoid(delta + bias)`` (softplus) and the per-program partial sums of
``gA, gR, gD, gbias`` (``(batch, nblk, K, d[, n])``, summed by the caller). ``gx`` (shared by the directions),
``gdelta``, ``gB, gC`` (shared by the channels) are added with ``tl.atomic_add`` into zeroed buffers of the inputs'
layouts. With several row blocks the adjoint entering a block from below comes from the same three steps upside
down: ``PHASE 0`` of :func:`_s2_bwd_kernel` runs each block's ``mu`` recurrence from zero (no row scan: ``mu`` does
not depend on ``nu``) and stores ``T_k = a[top] mu[top]``; the carry pass in reverse gives ``c_k`` (``c_{k-1} = T_k +
exp(A S_k) c_k``); ``PHASE 1`` runs the block from ``c_k``: per segment, bottom-up, it loads the checkpoint, walks the
segment's rows forward keeping their states in registers (a tuple of ``SEG + 1`` tiles, the last one the next
checkpoint: ``g = h - a h[p-1]`` needs no second row scan, and one row per segment none at all), then runs the
adjoints up through them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from neurodyn.ops.scan_2d.triton_op import scan2d_fwd_tile, scan2d_geometry, scan2d_warps
from neurodyn.ops.triton_loader import shared

common = shared()  # combine, rsum, softplus, the chunk tile's picks and lane scans (this build's)

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _frame(spec_ptr, k, H, W):
    """Direction ``k``: ``(transpose, flip rows, flip columns, P, Q)``."""
    tr = tl.load(spec_ptr + 3 * k) != 0
    fp = tl.load(spec_ptr + 3 * k + 1) != 0
    fq = tl.load(spec_ptr + 3 * k + 2) != 0
    return tr, fp, fq, tl.where(tr, W, H), tl.where(tr, H, W)


@triton.jit
def _axes(s_h, s_w, tr):
    """A tensor's strides along the frame's rows and columns."""
    return tl.where(tr, s_w, s_h), tl.where(tr, s_h, s_w)


@triton.jit
def _grid_row(p, fp, P):
    return tl.where(fp, P - 1 - p, p)


@triton.jit
def _width(p, P, Q):
    """The valid columns of frame row ``p``: ``Q`` inside the frame, none past its last row (a width rather than a
    row flag and-ed into the masks: the interpreter's loads take only masks built from tensors)."""
    return tl.where(p < P, Q, 0)


@triton.jit
def _program(
    spec_ptr,
    A_ptr,
    R_ptr,
    D_ptr,
    bias_ptr,
    K,
    dim,
    n,
    H,
    W,
    ACC: tl.constexpr,
    BD: tl.constexpr,
    BN: tl.constexpr,
    NB: tl.constexpr,
    BQ: tl.constexpr,
    HAS_D: tl.constexpr,
    HAS_BIAS: tl.constexpr,
):
    """A program's batch element, direction, frame, channels, states and parameters; ``first``: whether its block of
    states is the first (the terms outside the sums over the states, ``D x``, are its alone)."""
    pid = tl.program_id(0)
    b = (pid // K).to(tl.int64)
    k = pid % K
    tr, fp, fq, P, Q = _frame(spec_ptr, k, H, W)
    offs_d = (tl.program_id(1) // NB) * BD + tl.arange(0, BD)
    nb = tl.program_id(1) % NB
    offs_n = nb * BN + tl.arange(0, BN)
    offs_q = tl.arange(0, BQ)
    mask_d = offs_d < dim
    mask_n = offs_n < n
    mask_q = offs_q < Q
    kd = k * dim + offs_d
    mdn = mask_d[:, None] & mask_n[None, :]
    A = tl.load(A_ptr + kd[:, None] * n + offs_n[None, :], mask=mdn, other=0.0).to(ACC)
    R = tl.load(R_ptr + kd[:, None] * n + offs_n[None, :], mask=mdn, other=0.0).to(ACC)
    Dv = tl.full((BD,), 0.0, ACC)
    if HAS_D:
        Dv = tl.load(D_ptr + kd, mask=offs_d < tl.where(nb == 0, dim, 0), other=0.0).to(ACC)
    bias = tl.full((BD,), 0.0, ACC)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + kd, mask=mask_d, other=0.0).to(ACC)
    return b, k, tr, fp, fq, P, Q, offs_d, offs_n, offs_q, mask_d, mask_n, mask_q, A, R, Dv, bias, nb


@triton.jit
def _columns(offs_q, fq, Q, s_q):
    """The offsets of the frame's columns ``offs_q`` (``+1``: of the next column) along a tensor's frame columns."""
    return tl.where(fq, Q - 1 - offs_q, offs_q) * s_q


@triton.jit
def _step(v, bias, SOFTPLUS: tl.constexpr):
    """``(dt, dt/dv)`` from the raw ``delta`` tile ``v (BD, BQ)``."""
    pre = v + bias[:, None]
    if SOFTPLUS:
        dt, e, w = common.softplus(pre)  # (the 1-D scans' softplus: fast log and reciprocal)
        ddt = e * common.rcp(w)  # sigmoid(pre) = e / (1 + e)
    else:
        dt = pre
        ddt = pre * 0.0 + 1.0
    return dt, ddt


@triton.jit
def _row(
    x_base,
    xo,
    l_base,
    lo,
    B_base,
    bo,
    pp,
    x_sp,
    l_sp,
    B_sp,
    m_dq,
    m_nq,
    A,
    bias,
    ACC: tl.constexpr,
    SOFTPLUS: tl.constexpr,
):
    """Frame row ``pp`` (a grid row or column): ``(x, raw delta, dt, B, a, bx)``; masked cells give a = 1, bx = 0.
    A tensor's row is its scalar base pointer plus the row's offset, plus one offset tile per program (registers: no
    pointer tile per unrolled row)."""
    x = tl.load(x_base + pp * x_sp + xo, mask=m_dq, other=0.0).to(ACC)
    v = tl.load(l_base + pp * l_sp + lo, mask=m_dq, other=0.0).to(ACC)
    dt, _ = _step(v, bias, SOFTPLUS)
    dt = tl.where(m_dq, dt, 0.0)
    Bi = tl.load(B_base + pp * B_sp + bo, mask=m_nq, other=0.0).to(ACC)
    a = tl.exp2(dt[:, None, :] * A[:, :, None])
    bx = (dt * x)[:, None, :] * Bi[None, :, :]
    return x, v, dt, Bi, a, bx


@triton.jit
def _state_offsets(b, k, K, dim, n, offs_d, offs_n, offs_q, slots, BQ: tl.constexpr):
    """Offsets of slot 0 of a ``(batch, K, d, slots, n, BQ)`` state buffer (``+ slot n BQ`` for the others)."""
    row = ((b * K + k) * dim + offs_d) * slots
    return (row[:, None] * n + offs_n[None, :])[:, :, None] * BQ + offs_q[None, None, :]


# ---------------------------------------------------------------------------------------------------------------
# forward: rows of (BD, LANES, T) tiles, T consecutive frame columns in each thread, the states a loop


@common.helper
def _frame_tile(LANES: tl.constexpr, T: tl.constexpr):
    """The frame column of every element of a loaded ``(T, 1, LANES, 1)`` tile (thread ``lane`` holds the ``T``
    columns from ``lane T``)."""
    return tl.arange(0, LANES)[None, None, :, None] * T + tl.arange(0, T)[:, None, None, None]


@common.helper
def _col4(q4, fq, Q, s_q):
    """Offsets of frame columns ``q4`` along a tensor's frame columns (flipped: from the row's far end)."""
    return tl.where(fq, Q - 1 - q4, q4) * s_q


@common.helper
def _ld(ptr, mask4, ACC: tl.constexpr, BD: tl.constexpr, LANES: tl.constexpr, T: tl.constexpr):
    """A ``(T, BD, LANES, 1)`` load as the ``(BD, LANES, T)`` row tile (0 where masked)."""
    return common.tile(tl.load(ptr, mask=mask4, other=0.0).to(ACC), BD, LANES, T)


@common.helper
def _row_scan(a, bx, TA, h, lane, LANES: tl.constexpr, T: tl.constexpr):
    """One frame row of one state: the row scan ``g = a g[q-1] + bx`` (from 0 at the row's start: each thread's
    total input by the in-thread recurrence, then the totals scanned across the lanes, Kogge-Stone) and the column
    step ``h = a h + g`` on the row's states ``h (BD, LANES, T)`` (those of the row above)."""
    TX = common.pick(bx, 0, T, False)
    for t in tl.static_range(1, T):
        TX = common.pick(a, t, T, False) * TX + common.pick(bx, t, T, False)
    TX = common.lane_scan(TA, TX, lane, LANES, False)
    g = tl.where(common.first_lane(lane, LANES, False), 0.0, common.lane_prev(TX, lane, 1, LANES, False))
    hs = h
    for t in tl.static_range(T):
        at = common.pick(a, t, T, False)
        g = at * g + common.pick(bx, t, T, False)
        hs = common.put(hs, at * common.pick(h, t, T, False) + g, t, T, False)
    return hs


@triton.jit(do_not_specialize=["one"])
def _s2_fwd_kernel(
    x_ptr,
    dl_ptr,
    B_ptr,
    C_ptr,
    A_ptr,
    D_ptr,
    R_ptr,
    bias_ptr,
    spec_ptr,
    y_ptr,
    ck_ptr,
    st_ptr,
    ds_ptr,
    sx_b,
    sx_d,
    sx_h,
    sx_w,
    sl_b,
    sl_k,
    sl_d,
    sl_h,
    sl_w,
    sb_b,
    sb_k,
    sb_h,
    sb_w,
    sc_b,
    sc_k,
    sc_h,
    sc_w,
    K,
    dim,
    n,
    H,
    W,
    nseg,
    nblk,
    blk_rows,
    one,
    ACC: tl.constexpr,
    BD: tl.constexpr,
    BN: tl.constexpr,
    NB: tl.constexpr,
    LANES: tl.constexpr,
    T: tl.constexpr,
    CS: tl.constexpr,
    SB_N: tl.constexpr,
    SC_N: tl.constexpr,
    FORM: tl.constexpr,
    HAS_D: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    SOFTPLUS: tl.constexpr,
    PHASE: tl.constexpr,
    FROM_CARRY: tl.constexpr,
    SAVE_CKPT: tl.constexpr,
):
    BQ: tl.constexpr = LANES * T
    pid = tl.program_id(0)
    b = (pid // K).to(tl.int64)
    k = pid % K
    tr, fp, fq, P, Q = _frame(spec_ptr, k, H, W)
    d0 = (tl.program_id(1) // NB) * BD  # the program's first channel
    offs_d = d0 + tl.arange(0, BD)
    nb = tl.program_id(1) % NB
    blk = tl.program_id(2)
    mask_d = offs_d < dim
    kd = k * dim + offs_d
    lane = tl.arange(0, LANES)
    q4 = _frame_tile(LANES, T)  # (T, 1, LANES, 1)
    dl4 = tl.arange(0, BD)[None, :, None, None]  # the channel within the program
    md4 = d0 + dl4 < dim
    bias = tl.full((BD,), 0.0, ACC)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + kd, mask=mask_d, other=0.0).to(ACC)
    Dv = tl.full((BD,), 0.0, ACC)
    if HAS_D:
        Dv = tl.load(D_ptr + kd, mask=offs_d < tl.where(nb == 0, dim, 0), other=0.0).to(ACC)
    x_sp, x_sq = _axes(sx_h, sx_w, tr)
    l_sp, l_sq = _axes(sl_h, sl_w, tr)
    B_sp, B_sq = _axes(sb_h, sb_w, tr)
    C_sp, C_sq = _axes(sc_h, sc_w, tr)
    y_sp, y_sq = _axes(W, 1, tr)
    # 64-bit scalar bases (the program's batch element, direction, first channel and first state) and 32-bit offset
    # tiles; B and C of state s at the constant offset s SB_N, s SC_N from their row's pointers
    bk = b * K + k
    bkd = bk * dim + d0
    x_base, xo = x_ptr + b * sx_b + d0 * sx_d, dl4 * sx_d + _col4(q4, fq, Q, x_sq)
    l_base, lo = dl_ptr + b * sl_b + k * sl_k + d0 * sl_d, dl4 * sl_d + _col4(q4, fq, Q, l_sq)
    B_base, bo = B_ptr + b * sb_b + k * sb_k + nb * BN * SB_N, dl4 * 0 + _col4(q4, fq, Q, B_sq)
    C_base, co = C_ptr + b * sc_b + k * sc_k + nb * BN * SC_N, dl4 * 0 + _col4(q4, fq, Q, C_sq)
    y_base, yo = y_ptr + bkd * H * W, dl4 * (H * W) + _col4(q4, fq, Q, y_sq)
    # the block's entering / leaving states and the checkpoints: (T, BD, LANES, 1) offsets whose column part is
    # scaled by ``one`` (1, not specialised), so that Triton gives these accesses the row tiles' layout (time
    # in-thread) instead of vectorising them along the columns (a layout conversion through shuffles per access)
    q4s = q4 * one
    st_base, st = st_ptr + ((bkd * nblk + blk) * n + nb * BN) * BQ, dl4 * (nblk * n * BQ) + q4s  # (+ s BQ)
    ck_base, ck = ck_ptr + (bkd * (nseg + 1) * n + nb * BN) * BQ, dl4 * ((nseg + 1) * n * BQ) + q4s
    mst = md4 & (q4 < BQ)  # (whole BQ rows: zeros past Q)
    r0 = blk * blk_rows
    r1 = tl.minimum(r0 + blk_rows, P)
    ck_lim = tl.where(r1 == P, nseg * CS, r1 - 1)  # the last checkpoint this block writes: slot ck_lim / CS
    # per state of the program (a static loop: the states' row tiles stay in registers from row to row)
    hs = ()
    A2s = ()
    Rs = ()
    for s in tl.static_range(BN):
        sn = nb * BN + s
        ms = offs_d < tl.where(sn < n, dim, 0)
        A2s = A2s + (tl.load(A_ptr + kd * n + sn, mask=ms, other=0.0).to(ACC) * LOG2E,)
        Rs = Rs + (tl.load(R_ptr + kd * n + sn, mask=ms, other=0.0).to(ACC)[:, None, None],)
        m_s = mst & (q4 < tl.where(sn < n, BQ, 0))
        if FROM_CARRY:
            h = _ld(st_base + st + s * BQ, m_s, ACC, BD, LANES, T)
        else:
            h = tl.full((BD, LANES, T), 0.0, ACC)
        if SAVE_CKPT:
            tl.store(ck_base + ck + ((r0 // CS) * n + s) * BQ, common.untile(h, BD, LANES, T, 1), mask=m_s)
        hs = hs + (h,)
    dsum = tl.full((BD, LANES, T), 0.0, ACC)
    for p in range(r0, r1):
        pp = _grid_row(p, fp, P)
        m4 = md4 & (q4 < Q)
        x = _ld(x_base + (pp * x_sp + xo), m4, ACC, BD, LANES, T)
        v = _ld(l_base + (pp * l_sp + lo), m4, ACC, BD, LANES, T) + bias[:, None, None]
        if SOFTPLUS:
            dt, _e, _w = common.softplus(v)
        else:
            dt = v
        dt = tl.where(common.tile(m4, BD, LANES, T), dt, 0.0)
        if PHASE == 0:
            dsum += dt
        dtx = dt * x
        td = common.rsum(dt, 2)
        y = Dv[:, None, None] * x
        ckpt_row = ((p + 1) % CS == 0) & (p + 1 <= ck_lim)
        new_hs = ()
        for s in tl.static_range(BN):
            sn = nb * BN + s
            ms4 = m4 & (q4 < tl.where(sn < n, BQ, 0))
            a = tl.exp2(dt * A2s[s][:, None, None])
            bx = dtx * _ld(B_base + s * SB_N + (pp * B_sp + bo), ms4, ACC, BD, LANES, T)
            TA = tl.exp2(td * A2s[s][:, None])
            h = _row_scan(a, bx, TA, hs[s], lane, LANES, T)
            new_hs = new_hs + (h,)
            if SAVE_CKPT:
                tl.store(
                    ck_base + s * BQ + (((p + 1) // CS) * (n * BQ) + ck),
                    common.untile(h, BD, LANES, T, 1),
                    mask=mst & (q4 < tl.where(ckpt_row & (sn < n), BQ, 0)),
                )
            if PHASE == 1:
                Cs = _ld(C_base + s * SC_N + (pp * C_sp + co), ms4, ACC, BD, LANES, T)
                if FORM == 0:
                    y += Cs * (h - Rs[s] * bx)
                elif FORM == 1:
                    y += Cs * h - Rs[s] * bx
                else:
                    y += Cs * (h - Rs[s] * x)
        hs = new_hs
        if PHASE == 1:
            out = common.untile(y, BD, LANES, T, 1)
            if NB == 1:
                tl.store(y_base + (pp * y_sp + yo), out, mask=m4)
            else:  # (a partial sum over the states: y zeroed by the launcher)
                tl.atomic_add(y_base + (pp * y_sp + yo), out, mask=m4, sem="relaxed")
    if PHASE == 0:  # the block's leaving states and column sums of dt, for the carry pass
        for s in tl.static_range(BN):
            m_s = mst & (q4 < tl.where(nb * BN + s < n, BQ, 0))
            tl.store(st_base + st + s * BQ, common.untile(hs[s], BD, LANES, T, 1), mask=m_s)
        ds = dl4 * (nblk * BQ) + q4s
        tl.store(ds_ptr + (bkd * nblk + blk) * BQ + ds, common.untile(dsum, BD, LANES, T, 1), mask=mst)


@triton.jit
def _s2_carry_kernel(
    st_ptr,
    ds_ptr,
    A_ptr,
    K,
    dim,
    n,
    nblk,
    ACC: tl.constexpr,
    BD: tl.constexpr,
    BN: tl.constexpr,
    NB: tl.constexpr,
    BQ: tl.constexpr,
    REVERSE: tl.constexpr,
):
    """Block summaries -> the carries entering the blocks, in place (module docstring, step 2): top-down for the
    states, bottom-up (``REVERSE``) for the adjoints."""
    pid = tl.program_id(0)
    b = (pid // K).to(tl.int64)
    k = pid % K
    offs_d = (tl.program_id(1) // NB) * BD + tl.arange(0, BD)
    offs_n = (tl.program_id(1) % NB) * BN + tl.arange(0, BN)
    offs_q = tl.arange(0, BQ)
    mask_d = offs_d < dim
    mdn = mask_d[:, None] & (offs_n < n)[None, :]
    A = tl.load(A_ptr + (k * dim + offs_d)[:, None] * n + offs_n[None, :], mask=mdn, other=0.0).to(ACC) * LOG2E
    st = _state_offsets(b, k, K, dim, n, offs_d, offs_n, offs_q, nblk, BQ)
    ds = (((b * K + k) * dim + offs_d) * nblk)[:, None, None] * BQ + offs_q[None, None, :]
    m3 = mdn[:, :, None]
    c = tl.full((BD, BN, BQ), 0.0, ACC)
    for j in range(nblk):
        if REVERSE:
            blk = nblk - 1 - j
        else:
            blk = j
        t = tl.load(st_ptr + st + blk * n * BQ, mask=m3, other=0.0).to(ACC)
        tl.store(st_ptr + st + blk * n * BQ, c, mask=m3)
        dsum = tl.load(ds_ptr + ds + blk * BQ, mask=mask_d[:, None, None], other=0.0).to(ACC)
        c = tl.exp2(A[:, :, None] * dsum) * c + t


@triton.jit
def _s2_bwd_kernel(
    x_ptr,
    dl_ptr,
    B_ptr,
    C_ptr,
    A_ptr,
    D_ptr,
    R_ptr,
    bias_ptr,
    spec_ptr,
    ck_ptr,
    st_ptr,
    gy_ptr,
    gx_ptr,
    gl_ptr,
    gB_ptr,
    gC_ptr,
    pA_ptr,
    pR_ptr,
    pD_ptr,
    pb_ptr,
    sx_b,
    sx_d,
    sx_h,
    sx_w,
    sl_b,
    sl_k,
    sl_d,
    sl_h,
    sl_w,
    sb_b,
    sb_k,
    sb_n,
    sb_h,
    sb_w,
    sc_b,
    sc_k,
    sc_n,
    sc_h,
    sc_w,
    sg_b,
    sg_k,
    sg_d,
    sg_h,
    sg_w,
    K,
    dim,
    n,
    H,
    W,
    nseg,
    nblk,
    blk_segs,
    ACC: tl.constexpr,
    BD: tl.constexpr,
    BN: tl.constexpr,
    NB: tl.constexpr,
    BQ: tl.constexpr,
    SEG: tl.constexpr,
    FORM: tl.constexpr,
    HAS_D: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    SOFTPLUS: tl.constexpr,
    PHASE: tl.constexpr,
    FROM_CARRY: tl.constexpr,
):
    b, k, tr, fp, fq, P, Q, offs_d, offs_n, offs_q, mask_d, mask_n, mask_q, A, R, Dv, bias, nb = _program(
        spec_ptr, A_ptr, R_ptr, D_ptr, bias_ptr, K, dim, n, H, W, ACC, BD, BN, NB, BQ, HAS_D, HAS_BIAS
    )
    A2 = A * LOG2E
    A3 = A[:, :, None]
    R3 = R[:, :, None]
    blk = tl.program_id(2)
    x_sp, x_sq = _axes(sx_h, sx_w, tr)
    l_sp, l_sq = _axes(sl_h, sl_w, tr)
    B_sp, B_sq = _axes(sb_h, sb_w, tr)
    C_sp, C_sq = _axes(sc_h, sc_w, tr)
    y_sp, y_sq = _axes(W, 1, tr)
    g_sp, g_sq = _axes(sg_h, sg_w, tr)
    # scalar base pointers and one offset tile per layout (delta and its gradient, B and gB, C and gC share theirs)
    x_base, xo = x_ptr + b * sx_b, offs_d[:, None] * sx_d + _columns(offs_q, fq, Q, x_sq)[None, :]
    lo = offs_d[:, None] * sl_d + _columns(offs_q, fq, Q, l_sq)[None, :]
    lo_next = offs_d[:, None] * sl_d + _columns(offs_q + 1, fq, Q, l_sq)[None, :]
    l_base, gl_base = dl_ptr + b * sl_b + k * sl_k, gl_ptr + b * sl_b + k * sl_k
    bo = offs_n[:, None] * sb_n + _columns(offs_q, fq, Q, B_sq)[None, :]
    B_base, gB_base = B_ptr + b * sb_b + k * sb_k, gB_ptr + b * sb_b + k * sb_k
    co = offs_n[:, None] * sc_n + _columns(offs_q, fq, Q, C_sq)[None, :]
    C_base, gC_base = C_ptr + b * sc_b + k * sc_k, gC_ptr + b * sc_b + k * sc_k
    bo3 = offs_n[None, :, None] * sb_n + _columns(offs_q, fq, Q, B_sq)[None, None, :]
    co3 = offs_n[None, :, None] * sc_n + _columns(offs_q, fq, Q, C_sq)[None, None, :]
    gy_base, go = gy_ptr + b * sg_b + k * sg_k, (offs_d * sg_d)[:, None] + _columns(offs_q, fq, Q, g_sq)[None, :]
    gx_base, yo = gx_ptr + b * dim * H * W, (offs_d * H * W)[:, None] + _columns(offs_q, fq, Q, y_sq)[None, :]
    m3 = mask_d[:, None, None] & mask_n[None, :, None] & mask_q[None, None, :]
    st = _state_offsets(b, k, K, dim, n, offs_d, offs_n, offs_q, nblk, BQ) + blk * n * BQ
    if FROM_CARRY:
        mu_c = tl.load(st_ptr + st, mask=m3, other=0.0).to(ACC)  # c_k: a mu of the row below the block
    else:
        mu_c = tl.full((BD, BN, BQ), 0.0, ACC)
    ck = _state_offsets(b, k, K, dim, n, offs_d, offs_n, offs_q, nseg + 1, BQ)
    gA = tl.full((BD, BN), 0.0, ACC)
    gR = tl.full((BD, BN), 0.0, ACC)
    gD = tl.full((BD,), 0.0, ACC)
    gbias = tl.full((BD,), 0.0, ACC)
    seg0 = blk * blk_segs
    seg1 = tl.minimum(seg0 + blk_segs, (P + SEG - 1) // SEG)
    if PHASE == 1:  # the state leaving the block's last segment (carried down: each checkpoint is loaded once)
        h_top = tl.load(ck_ptr + ck + seg1 * n * BQ, mask=m3, other=0.0).to(ACC)
    for i in range(seg1 - seg0):
        s = seg1 - 1 - i
        if PHASE == 1:
            # the segment's states, forward from its checkpoint: hs[j] enters row j, hs[j + 1] leaves it
            h = tl.load(ck_ptr + ck + s * n * BQ, mask=m3, other=0.0).to(ACC)
            h_entry = h
            hs = (h,)
            for j in tl.static_range(SEG - 1):  # (the segment's last state is the next checkpoint)
                p = s * SEG + j
                pp = _grid_row(p, fp, P)
                mq = offs_q < _width(p, P, Q)
                m_dq = mask_d[:, None] & mq[None, :]
                m_nq = mask_n[:, None] & mq[None, :]
                x, v, dt, Bi, a, bx = _row(
                    x_base, xo, l_base, lo, B_base, bo, pp, x_sp, l_sp, B_sp, m_dq, m_nq, A2, bias, ACC, SOFTPLUS
                )
                _, g = tl.associative_scan((a, bx), 2, common.combine)
                h = a * h + g
                hs = hs + (h,)
            hs = hs + (h_top,)
            h_top = h_entry
        for jj in tl.static_range(SEG):  # (row j = SEG - 1 - jj; tuple indices written out: they must be constants)
            p = s * SEG + (SEG - 1 - jj)
            pp = _grid_row(p, fp, P)
            width = _width(p, P, Q)
            mq = offs_q < width
            m_dq = mask_d[:, None] & mq[None, :]
            m_nq = mask_n[:, None] & mq[None, :]
            gyr = tl.load(gy_base + pp * g_sp + go, mask=m_dq, other=0.0).to(ACC)
            Ci = tl.load(C_base + pp * C_sp + co, mask=m_nq, other=0.0).to(ACC)
            cg = Ci[None, :, :] * gyr[:, None, :]
            mu = cg + mu_c
            if PHASE == 0:
                v = tl.load(l_base + pp * l_sp + lo, mask=m_dq, other=0.0).to(ACC)
                dt, _ = _step(v, bias, SOFTPLUS)
                dt = tl.where(m_dq, dt, 0.0)
                mu_c = tl.exp2(dt[:, None, :] * A2[:, :, None]) * mu
            else:
                x, v, dt, Bi, a, bx = _row(
                    x_base, xo, l_base, lo, B_base, bo, pp, x_sp, l_sp, B_sp, m_dq, m_nq, A2, bias, ACC, SOFTPLUS
                )
                ah = a * hs[SEG - 1 - jj]  # a h[p-1]
                h = hs[SEG - jj]
                # the row adjoint: a reverse scan with the next column's decay (1 past the row's end)
                mn = mask_d[:, None] & (offs_q + 1 < width)[None, :]
                vn = tl.load(l_base + pp * l_sp + lo_next, mask=mn, other=0.0).to(ACC)
                dtn, _ = _step(vn, bias, SOFTPLUS)
                an = tl.exp2(tl.where(mn, dtn, 0.0)[:, None, :] * A2[:, :, None])
                _, nu = tl.associative_scan((an, mu), 2, common.combine, reverse=True)
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
                ada = mu * ah + nu * (h - ah - bx)  # a dL/da  (g = h - a h[p-1])
                gdt = common.rsum(A3 * ada + x[:, None, :] * Bi[None, :, :] * gbx, 1)
                gxr = common.rsum(gbx * dt[:, None, :] * Bi[None, :, :], 1) + Dv[:, None] * gyr
                if FORM == 2:
                    gxr -= common.rsum(R3 * cg, 1)
                _, ddt = _step(v, bias, SOFTPLUS)
                gdl = tl.where(m_dq, gdt * ddt, 0.0)
                gA += common.rsum(ada * dt[:, None, :], 2)
                gD += common.rsum(gyr * x, 1) * tl.where(nb == 0, 1.0, 0.0)
                gbias += common.rsum(gdl, 1)
                tl.atomic_add(gx_base + pp * y_sp + yo, gxr, mask=m_dq, sem="relaxed")
                tl.atomic_add(gl_base + pp * l_sp + lo, gdl, mask=m_dq, sem="relaxed")
                # (summed over the block's channels; written as (1, BN, BQ) tiles of the 3-D layout: no conversion)
                tl.atomic_add(
                    gB_base + pp * B_sp + bo3,
                    common.rsum(gbx * (dt * x)[:, None, :], 0)[None, :, :],
                    mask=m_nq[None, :, :],
                    sem="relaxed",
                )
                tl.atomic_add(
                    gC_base + pp * C_sp + co3,
                    common.rsum(gc3 * gyr[:, None, :], 0)[None, :, :],
                    mask=m_nq[None, :, :],
                    sem="relaxed",
                )
                mu_c = a * mu
    if PHASE == 0:
        # T_k = a mu at the block's top row, from a zero carry (every BQ column: zeros past Q)
        tl.store(st_ptr + st, mu_c, mask=(mask_d[:, None] & mask_n[None, :])[:, :, None])
    else:
        part = ((b * tl.num_programs(2) + blk) * K + k) * dim + offs_d  # (batch, nblk, K, d[, n]) partial sums
        mdn = mask_d[:, None] & mask_n[None, :]
        tl.store(pA_ptr + part[:, None] * n + offs_n[None, :], gA, mask=mdn)
        tl.store(pR_ptr + part[:, None] * n + offs_n[None, :], gR, mask=mdn)
        part_nb = (((b * tl.num_programs(2) + blk) * NB + nb) * K + k) * dim + offs_d  # (batch, nblk, NB, K, d)
        tl.store(pD_ptr + part_nb, gD, mask=mask_d)
        tl.store(pb_ptr + part_nb, gbias, mask=mask_d)


# ---------------------------------------------------------------------------------------------------------------
# launchers (arguments prepared by neurodyn.ops.scan_2d.triton_op)


_SPECS: dict = {}


def _spec(dirs, device) -> torch.Tensor:
    """The ``(K, 3)`` int32 direction table on ``device`` (cached: one copy per direction set and device)."""
    key = (tuple(dirs), str(device))
    if key not in _SPECS:
        _SPECS[key] = torch.tensor(list(dirs), dtype=torch.int32, device=device)
    return _SPECS[key]


def _acc(*tensors):
    return tl.float64 if any(t is not None and t.dtype == torch.float64 for t in tensors) else tl.float32


def _tdtype(acc) -> torch.dtype:
    return torch.float64 if acc == tl.float64 else torch.float32


def _strides5(t: torch.Tensor) -> tuple[int, ...]:
    """``(batch, K, channel, H, W)`` strides of a 4-D (shared by the directions: K stride 0) or 5-D tensor."""
    s = t.stride()
    return (s[0], 0, s[1], s[2], s[3]) if t.dim() == 4 else tuple(s)


def _geometry(x, A, dirs, seg, rows):
    """``(batch, d, H, W, K, n, BQ, segments, segments per row block, row blocks)``
    (:func:`neurodyn.ops.scan_2d.triton_op.scan2d_geometry`)."""
    batch, dim, H, W = x.shape
    K, _, n = A.shape
    bq, nseg, nblk = scan2d_geometry(H, W, dirs, seg, rows)
    return batch, dim, H, W, K, n, bq, nseg, max(rows // seg, 1), nblk


def fwd(x, delta, A, B, C, D, R, bias, dirs, softplus, form, save_ckpt, seg, rows, block_d, block_n):
    """``(y (batch, K, d, H, W), ckpt (batch, K, d, nseg + 1, n, BQ) or empty, dsum (batch, K, d, nblk, BQ) or empty)``
    in the accumulation dtype; ``A, R (K, d, n)``, ``D, bias (K, d)`` or None contiguous; ``dirs`` the flattened
    ``(K, 3)`` direction table. The forward's own tile (:func:`neurodyn.ops.scan_2d.triton_op.scan2d_fwd_tile`);
    ``block_d, block_n`` are the backward's."""
    acc = _acc(x, delta, A, B, C, D, R, bias)
    f = _tdtype(acc)
    batch, dim, H, W, K, n, bq, nseg, blk_segs, nblk = _geometry(x, A, dirs, seg, rows)
    tile = scan2d_fwd_tile(dim, n, bq)
    y = (x.new_zeros if tile.nb > 1 else x.new_empty)(batch, K, dim, H, W, dtype=f)
    # (a direction with fewer frame rows than another, transposed on a non-square grid, leaves slots unwritten)
    short = any(dirs[3 * i] for i in range(K)) and H != W
    ckpt = (
        (x.new_zeros if short else x.new_empty)(batch, K, dim, nseg + 1, n, bq, dtype=f)
        if save_ckpt
        else x.new_empty(0, dtype=f)
    )
    dsum = x.new_empty(batch, K, dim, nblk, bq, dtype=f) if nblk > 1 else x.new_empty(0, dtype=f)
    if y.numel() == 0:
        return y, ckpt, dsum
    st = x.new_empty(batch, K, dim, nblk, n, bq, dtype=f)  # the states between segments (and row blocks)
    spec = _spec(dirs, x.device)
    args = (x, delta, B, C, A, x if D is None else D, R, x if bias is None else bias, spec)
    sB, sC = _strides5(B), _strides5(C)
    strides = (
        *x.stride(),
        *_strides5(delta),
        *sB[:2],
        *sB[3:],
        *sC[:2],
        *sC[3:],
        K,
        dim,
        n,
        H,
        W,
        nseg,
        nblk,
        seg * blk_segs,
        1,  # one
    )
    grid = (batch * K, triton.cdiv(dim, tile.block_d) * tile.nb, nblk)
    meta = dict(
        ACC=acc,
        BD=tile.block_d,
        BN=tile.block_n,
        NB=tile.nb,
        LANES=tile.lanes,
        T=tile.cols,
        CS=seg,
        SB_N=sB[2],
        SC_N=sC[2],
        FORM=form,
        HAS_D=D is not None,
        HAS_BIAS=bias is not None,
        SOFTPLUS=softplus,
        num_warps=tile.warps,
    )
    if nblk > 1:
        _s2_fwd_kernel[grid](*args, y, y, st, dsum, *strides, **meta, PHASE=0, FROM_CARRY=False, SAVE_CKPT=False)
        bwd_tile = dict(BD=block_d, BN=block_n, NB=triton.cdiv(triton.next_power_of_2(n), block_n))
        _s2_carry_kernel[(batch * K, triton.cdiv(dim, block_d) * bwd_tile["NB"])](
            st,
            dsum,
            A,
            K,
            dim,
            n,
            nblk,
            ACC=acc,
            BQ=bq,
            REVERSE=False,
            num_warps=scan2d_warps(block_d, block_n, bq),
            **bwd_tile,
        )
    _s2_fwd_kernel[grid](
        *args,
        y,
        ckpt if save_ckpt else y,
        st,
        dsum if nblk > 1 else y,
        *strides,
        **meta,
        PHASE=1,
        FROM_CARRY=nblk > 1,
        SAVE_CKPT=save_ckpt,
    )
    return y, ckpt, dsum


def bwd(x, delta, A, B, C, D, R, bias, dirs, softplus, form, ckpt, dsum, gy, seg, rows, block_d, block_n):
    """``(gx, gdelta, gB, gC)`` like x, delta, B, C and ``(gA, gR (K, d, n), gD, gbias (K, d))``, all in the
    accumulation dtype; ``gy (batch, K, d, H, W)`` of any strides (0 along K: the directions' merged gradient);
    delta, B, C contiguous (the gradients are written in their layouts)."""
    acc = _acc(x, delta, A, B, C, D, R, bias)
    f = _tdtype(acc)
    batch, dim, H, W, K, n, bq, nseg, blk_segs, nblk = _geometry(x, A, dirs, seg, rows)
    bn = block_n
    nb = triton.cdiv(triton.next_power_of_2(n), bn)
    zeros = lambda t: torch.zeros(t.shape, dtype=f, device=t.device)  # noqa: E731
    gx, gl, gB, gC = zeros(x), zeros(delta), zeros(B), zeros(C)
    pA, pR = (x.new_zeros(batch, nblk, K, dim, n, dtype=f) for _ in range(2))
    pD, pb = (x.new_zeros(batch, nblk, nb, K, dim, dtype=f) for _ in range(2))
    if x.numel() and gy.numel():
        spec = _spec(dirs, x.device)
        st = x.new_empty(batch, K, dim, nblk, n, bq, dtype=f) if nblk > 1 else gx
        args = (
            x,
            delta,
            B,
            C,
            A,
            x if D is None else D,
            R,
            x if bias is None else bias,
            spec,
            ckpt,
            st,
            gy,
            gx,
            gl,
            gB,
            gC,
        )
        strides = (
            *x.stride(),
            *_strides5(delta),
            *_strides5(B),
            *_strides5(C),
            *gy.stride(),
            K,
            dim,
            n,
            H,
            W,
            nseg,
            nblk,
            blk_segs,
        )
        grid = (batch * K, triton.cdiv(dim, block_d) * nb, nblk)
        meta = dict(
            ACC=acc,
            BD=block_d,
            BN=bn,
            NB=nb,
            BQ=bq,
            SEG=seg,
            FORM=form,
            HAS_D=D is not None,
            HAS_BIAS=bias is not None,
            SOFTPLUS=softplus,
            num_warps=scan2d_warps(block_d, bn, bq),
        )
        if nblk > 1:
            _s2_bwd_kernel[grid](*args, pA, pR, pD, pb, *strides, **meta, PHASE=0, FROM_CARRY=False)
            _s2_carry_kernel[grid[:2]](
                st,
                dsum,
                A,
                K,
                dim,
                n,
                nblk,
                ACC=acc,
                BD=block_d,
                BN=bn,
                NB=nb,
                BQ=bq,
                REVERSE=True,
                num_warps=meta["num_warps"],
            )
        _s2_bwd_kernel[grid](*args, pA, pR, pD, pb, *strides, **meta, PHASE=1, FROM_CARRY=nblk > 1)
    return gx, gl, gB, gC, pA.sum((0, 1)), pR.sum((0, 1)), pD.sum((0, 1, 2)), pb.sum((0, 1, 2))
