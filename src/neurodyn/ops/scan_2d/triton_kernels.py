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
   row and leaving the last, ``ckpt (batch, K, d, nseg + 1, n, BQ)`` (``nseg``: the most frame rows of a direction).

With one block per direction, only step 3 runs (from a zero state).

Backward (:func:`_s2_bwd_kernel`; the adjoints ``mu = dL/dh``, ``nu = dL/dg``)::

    mu[p, q] = C gy + a[p+1, q] mu[p+1, q]                (carried from row to row, upwards)
    nu[p, q] = mu + a[p, q+1] nu[p, q+1]                   (a reverse scan along the row)
    dL/dbx   = nu - R C gy (cbx) / - R gy (eq9) / nu (alg2);  a dL/da = mu a h[p-1] + nu (g - bx)

(``a g[p, q-1] = g - bx``), from which ``gdt = sum_n (A a dL/da + B x dL/dbx)``, ``gx = dt sum_n B dL/dbx + D gy``
(alg2: ``- sum_n R C gy``), ``gdelta = gdt sigmoid(delta + bias)`` (softplus) and the per-program partial sums of
``gA, gR, gD, gbias`` (``(batch, nblk, K, d[, n])``, summed by the caller). ``gx`` (shared by the directions),
``gdelta``, ``gB, gC`` (shared by the channels) are added with ``tl.atomic_add`` into zeroed buffers of the inputs'
layouts (gB and gC summed over the program's channels first, by its first channel row).

The forward's layout, ``BN`` states per program (:func:`neurodyn.ops.scan_2d.triton_op.scan2d_bwd_tile`). The
programs walk their rows bottom-up with, per state, the adjoint carried to the row above (``a mu``) and the row's
states in registers; the states entering each row are the forward's checkpoint of that row (every row's is kept:
``g = h - a h[p-1]`` needs no row scan to recompute). Per state and row: ``mu``, then ``nu`` by the 1-D scans' chunk
adjoint (each thread's columns in-thread, the totals scanned across the lanes from the last, the decays of the
columns' successors: a thread's own and its next lane's first), the gradient terms, ``gB``/``gC`` added. With several
row blocks the adjoint entering a block from below comes from the same three steps upside down: ``PHASE 0`` runs each
block's ``mu`` recurrence from zero (no row scan: ``mu`` does not depend on ``nu``) and stores ``T_k = a[top]
mu[top]``; the carry pass in reverse gives ``c_k`` (``c_{k-1} = T_k + exp(A S_k) c_k``); ``PHASE 1`` runs the block
from ``c_k``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from neurodyn.ops.scan_2d.triton_op import scan2d_bwd_tile, scan2d_fwd_tile, scan2d_geometry, scan2d_warps
from neurodyn.ops.triton_loader import shared

common = shared()  # combine, rsum, softplus, the chunk tile's picks and lane scans (this build's)

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


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
def _program(
    spec_ptr,
    bias_ptr,
    D_ptr,
    K,
    dim,
    H,
    W,
    ACC: tl.constexpr,
    BD: tl.constexpr,
    NB: tl.constexpr,
    LANES: tl.constexpr,
    T: tl.constexpr,
    HAS_D: tl.constexpr,
    HAS_BIAS: tl.constexpr,
):
    """A program's batch element ``b``, direction ``k`` and its frame, first channel ``d0`` and channels, state block
    ``nb``, row block ``blk``; the lanes, the frame columns ``q4 (T, 1, LANES, 1)`` and channels ``dl4 (1, BD, 1, 1)``
    within the program of the loaded tiles; the channels' bias and ``D`` (``D x`` is state block 0's term)."""
    pid = tl.program_id(0)
    b = (pid // K).to(tl.int64)
    k = pid % K
    tr, fp, fq, P, Q = _frame(spec_ptr, k, H, W)
    d0 = (tl.program_id(1) // NB) * BD
    offs_d = d0 + tl.arange(0, BD)
    nb = tl.program_id(1) % NB
    mask_d = offs_d < dim
    kd = k * dim + offs_d
    dl4 = tl.arange(0, BD)[None, :, None, None]
    bias = tl.full((BD,), 0.0, ACC)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + kd, mask=mask_d, other=0.0).to(ACC)
    Dv = tl.full((BD,), 0.0, ACC)
    if HAS_D:
        Dv = tl.load(D_ptr + kd, mask=offs_d < tl.where(nb == 0, dim, 0), other=0.0).to(ACC)
    return (
        b,
        k,
        tr,
        fp,
        fq,
        P,
        Q,
        d0,
        offs_d,
        nb,
        tl.program_id(2),
        mask_d,
        kd,
        tl.arange(0, LANES),
        _frame_tile(LANES, T),
        dl4,
        d0 + dl4 < dim,
        bias,
        Dv,
    )


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
    b, k, tr, fp, fq, P, Q, d0, offs_d, nb, blk, mask_d, kd, lane, q4, dl4, md4, bias, Dv = _program(
        spec_ptr, bias_ptr, D_ptr, K, dim, H, W, ACC, BD, NB, LANES, T, HAS_D, HAS_BIAS
    )
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
    ck_lim = tl.where(r1 == P, P, r1 - 1)  # the last checkpoint this block writes (the next block's first: its own)
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
            tl.store(ck_base + ck + (r0 * n + s) * BQ, common.untile(h, BD, LANES, T, 1), mask=m_s)
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
        ckpt_row = p + 1 <= ck_lim
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
                    ck_base + s * BQ + ((p + 1) * (n * BQ) + ck),
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


@triton.jit(do_not_specialize=["one"])
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
    sb_h,
    sb_w,
    sc_b,
    sc_k,
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
    blk_rows,
    one,
    ACC: tl.constexpr,
    BD: tl.constexpr,
    BN: tl.constexpr,
    NB: tl.constexpr,
    LANES: tl.constexpr,
    T: tl.constexpr,
    SB_N: tl.constexpr,
    SC_N: tl.constexpr,
    FORM: tl.constexpr,
    HAS_D: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    SOFTPLUS: tl.constexpr,
    PHASE: tl.constexpr,
    FROM_CARRY: tl.constexpr,
):
    BQ: tl.constexpr = LANES * T
    b, k, tr, fp, fq, P, Q, d0, offs_d, nb, blk, mask_d, kd, lane, q4, dl4, md4, bias, Dv = _program(
        spec_ptr, bias_ptr, D_ptr, K, dim, H, W, ACC, BD, NB, LANES, T, HAS_D, HAS_BIAS
    )
    last_lane = (lane == LANES - 1)[None, :]
    x_sp, x_sq = _axes(sx_h, sx_w, tr)
    l_sp, l_sq = _axes(sl_h, sl_w, tr)
    B_sp, B_sq = _axes(sb_h, sb_w, tr)
    C_sp, C_sq = _axes(sc_h, sc_w, tr)
    g_sp, g_sq = _axes(sg_h, sg_w, tr)
    y_sp, y_sq = _axes(W, 1, tr)
    bk = b * K + k
    bkd = bk * dim + d0
    # delta and its gradient, B and gB, C and gC share their offsets (the gradients have the inputs' layouts)
    x_base, xo = x_ptr + b * sx_b + d0 * sx_d, dl4 * sx_d + _col4(q4, fq, Q, x_sq)
    l_off = b * sl_b + k * sl_k + d0 * sl_d
    l_base, gl_base, lo = dl_ptr + l_off, gl_ptr + l_off, dl4 * sl_d + _col4(q4, fq, Q, l_sq)
    B_off = b * sb_b + k * sb_k + nb * BN * SB_N
    B_base, gB_base, bo = B_ptr + B_off, gB_ptr + B_off, dl4 * 0 + _col4(q4, fq, Q, B_sq)
    C_off = b * sc_b + k * sc_k + nb * BN * SC_N
    C_base, gC_base, co = C_ptr + C_off, gC_ptr + C_off, dl4 * 0 + _col4(q4, fq, Q, C_sq)
    gy_base, go = gy_ptr + b * sg_b + k * sg_k + d0 * sg_d, dl4 * sg_d + _col4(q4, fq, Q, g_sq)
    gx_base, gxo = gx_ptr + (b * dim + d0) * H * W, dl4 * (H * W) + _col4(q4, fq, Q, y_sq)
    q4s = q4 * one  # (the forward's reason: the row tiles' layout for the state buffers)
    st_base, st = st_ptr + ((bkd * nblk + blk) * n + nb * BN) * BQ, dl4 * (nblk * n * BQ) + q4s
    ck_base, ck = ck_ptr + (bkd * (nseg + 1) * n + nb * BN) * BQ, dl4 * ((nseg + 1) * n * BQ) + q4s
    mst = md4 & (q4 < BQ)
    r0 = blk * blk_rows
    r1 = tl.minimum(r0 + blk_rows, P)
    # per state: parameters, the adjoint carried up to the next row (a mu of the row below), the states of the row
    # (those leaving it: the checkpoint after it), the partial sums of gA and gR per thread
    A2s = ()
    Rs = ()
    mus = ()
    hs = ()
    gAs = ()
    gRs = ()
    for s in tl.static_range(BN):
        sn = nb * BN + s
        ms = offs_d < tl.where(sn < n, dim, 0)
        A = tl.load(A_ptr + kd * n + sn, mask=ms, other=0.0).to(ACC)
        A2s = A2s + (A * LOG2E,)
        Rs = Rs + (tl.load(R_ptr + kd * n + sn, mask=ms, other=0.0).to(ACC)[:, None, None],)
        m_s = mst & (q4 < tl.where(sn < n, BQ, 0))
        if FROM_CARRY:
            mus = mus + (_ld(st_base + st + s * BQ, m_s, ACC, BD, LANES, T),)
        else:
            mus = mus + (tl.full((BD, LANES, T), 0.0, ACC),)
        if PHASE == 1:  # (checkpoints every row: slot r1 holds the state leaving the block's last row)
            hs = hs + (_ld(ck_base + s * BQ + (r1 * (n * BQ) + ck), m_s, ACC, BD, LANES, T),)
        gAs = gAs + (tl.full((BD, LANES), 0.0, ACC),)
        gRs = gRs + (tl.full((BD, LANES), 0.0, ACC),)
    gD = tl.full((BD, LANES), 0.0, ACC)
    gbias = tl.full((BD, LANES), 0.0, ACC)
    zero_d = tl.full((BD,), 0.0, ACC)
    for i in range(r1 - r0):
        p = r1 - 1 - i
        pp = _grid_row(p, fp, P)
        m4 = md4 & (q4 < Q)
        mt = common.tile(m4, BD, LANES, T)
        gy = _ld(gy_base + (pp * g_sp + go), m4, ACC, BD, LANES, T)
        v = _ld(l_base + (pp * l_sp + lo), m4, ACC, BD, LANES, T) + bias[:, None, None]
        if SOFTPLUS:
            dt, e, w = common.softplus(v)
            ddt = e * common.rcp(w)  # sigmoid(v) = e / (1 + e)
        else:
            dt = v
            ddt = v * 0.0 + 1.0
        dt = tl.where(mt, dt, 0.0)
        new_mus = ()
        if PHASE == 0:  # the adjoint alone, from a zero carry: mu = C gy + a[p+1] mu[p+1]
            for s in tl.static_range(BN):
                sn = nb * BN + s
                ms4 = m4 & (q4 < tl.where(sn < n, BQ, 0))
                Cs = _ld(C_base + s * SC_N + (pp * C_sp + co), ms4, ACC, BD, LANES, T)
                new_mus = new_mus + (tl.exp2(dt * A2s[s][:, None, None]) * (Cs * gy + mus[s]),)
            mus = new_mus
        else:
            x = _ld(x_base + (pp * x_sp + xo), m4, ACC, BD, LANES, T)
            dtx = dt * x
            dt0 = common.pick(dt, 0, T, False)
            dtn = tl.where(last_lane, 0.0, common.lane_prev(dt0, lane, 1, LANES, True))  # the next thread's first
            tdb = common.rsum(dt, 2) - dt0 + dtn  # a thread's steps' successors: its columns 1..T-1, the next's 0
            S = tl.full((BD, LANES, T), 0.0, ACC)  # sum_n B dL/dbx
            GA = tl.full((BD, LANES, T), 0.0, ACC)  # sum_n A log2(e) a dL/da
            RC = tl.full((BD, LANES, T), 0.0, ACC)  # sum_n R C (alg2)
            new_hs = ()
            new_gAs = ()
            new_gRs = ()
            for s in tl.static_range(BN):
                sn = nb * BN + s
                ms4 = m4 & (q4 < tl.where(sn < n, BQ, 0))
                m_s = mst & (q4 < tl.where(sn < n, BQ, 0))
                Bs = _ld(B_base + s * SB_N + (pp * B_sp + bo), ms4, ACC, BD, LANES, T)
                Cs = _ld(C_base + s * SC_N + (pp * C_sp + co), ms4, ACC, BD, LANES, T)
                hp = _ld(ck_base + s * BQ + (p * (n * BQ) + ck), m_s, ACC, BD, LANES, T)  # h[p-1]
                A2 = A2s[s][:, None]
                a = tl.exp2(dt * A2[:, :, None])
                bx = dtx * Bs
                ah = a * hp
                g = hs[s] - ah  # (h = a h[p-1] + g)
                cg = Cs * gy
                mu = cg + mus[s]
                nu, _ = common.chunk_adjoint(a, mu, tl.exp2(tdb * A2), tl.exp2(dtn * A2), zero_d, lane, T, LANES, False)
                if FORM == 0:
                    gbx = nu - Rs[s] * cg
                    gr = cg * bx
                    gc = hs[s] - Rs[s] * bx
                elif FORM == 1:
                    gbx = nu - Rs[s] * gy
                    gr = gy * bx
                    gc = hs[s]
                else:
                    gbx = nu
                    gr = cg * x
                    gc = hs[s] - Rs[s] * x
                    RC += Rs[s] * Cs
                ada = mu * ah + nu * (g - bx)  # a dL/da = mu a h[p-1] + nu a g[q-1]
                S += Bs * gbx
                GA += A2s[s][:, None, None] * ada
                new_gAs = new_gAs + (gAs[s] + common.rsum(dt * ada, 2),)
                new_gRs = new_gRs + (gRs[s] - common.rsum(gr, 2),)
                # gB, gC: summed over the program's channels, added by its first channel row
                gBs = tl.broadcast_to(common.rsum(gbx * dtx, 0)[None, :, :], (BD, LANES, T))
                gCs = tl.broadcast_to(common.rsum(gc * gy, 0)[None, :, :], (BD, LANES, T))
                mB = ms4 & (dl4 == 0)
                tl.atomic_add(
                    gB_base + s * SB_N + (pp * B_sp + bo), common.untile(gBs, BD, LANES, T, 1), mask=mB, sem="relaxed"
                )
                tl.atomic_add(
                    gC_base + s * SC_N + (pp * C_sp + co), common.untile(gCs, BD, LANES, T, 1), mask=mB, sem="relaxed"
                )
                new_mus = new_mus + (a * mu,)
                new_hs = new_hs + (hp,)
            mus = new_mus
            hs = new_hs
            gAs = new_gAs
            gRs = new_gRs
            gdl = tl.where(mt, (GA * LN2 + x * S) * ddt, 0.0)
            gxr = dt * S + Dv[:, None, None] * gy
            if FORM == 2:
                gxr -= RC * gy
            gD += common.rsum(gy * x, 2)
            gbias += common.rsum(gdl, 2)
            tl.atomic_add(gx_base + (pp * y_sp + gxo), common.untile(gxr, BD, LANES, T, 1), mask=m4, sem="relaxed")
            tl.atomic_add(gl_base + (pp * l_sp + lo), common.untile(gdl, BD, LANES, T, 1), mask=m4, sem="relaxed")
    if PHASE == 0:  # T_k = a mu at the block's top row, from a zero carry (whole BQ rows: zeros past Q)
        for s in tl.static_range(BN):
            m_s = mst & (q4 < tl.where(nb * BN + s < n, BQ, 0))
            tl.store(st_base + st + s * BQ, common.untile(mus[s], BD, LANES, T, 1), mask=m_s)
    else:
        b32 = tl.program_id(0) // K  # (32-bit: these buffers are small; no 64-bit index kept live through the loop)
        part = ((b32 * nblk + blk) * K + k) * dim + offs_d  # (batch, nblk, K, d[, n]) partial sums
        for s in tl.static_range(BN):
            sn = nb * BN + s
            ms = offs_d < tl.where(sn < n, dim, 0)
            tl.store(pA_ptr + part * n + sn, common.rsum(gAs[s], 1), mask=ms)
            tl.store(pR_ptr + part * n + sn, common.rsum(gRs[s], 1), mask=ms)
        part_nb = (((b32 * nblk + blk) * NB + nb) * K + k) * dim + offs_d  # (batch, nblk, NB, K, d)
        tl.store(pD_ptr + part_nb, common.rsum(gD, 1), mask=offs_d < tl.where(nb == 0, dim, 0))  # (block 0's term)
        tl.store(pb_ptr + part_nb, common.rsum(gbias, 1), mask=mask_d)


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


def _geometry(x, A, dirs, rows):
    """``(batch, d, H, W, K, n, BQ, frame rows P, row blocks)``
    (:func:`neurodyn.ops.scan_2d.triton_op.scan2d_geometry`)."""
    batch, dim, H, W = x.shape
    K, _, n = A.shape
    bq, P, nblk = scan2d_geometry(H, W, dirs, rows)
    return batch, dim, H, W, K, n, bq, P, nblk


def _launch(x, delta, B, C, gy, tile, acc, form, D, bias, softplus, A, rows, nseg, nblk):
    """``(strides and sizes, grid, meta-parameters)`` of a launch of the forward (``gy`` None) or the backward kernel
    on ``tile`` (:class:`neurodyn.ops.scan_2d.triton_op.Tile`): B's and C's state strides are compile-time constants
    (``SB_N``, ``SC_N``), the others arguments."""
    batch, dim, H, W = x.shape
    K, _, n = A.shape
    sB, sC = _strides5(B), _strides5(C)
    grads = () if gy is None else gy.stride()
    strides = (*x.stride(), *_strides5(delta), *sB[:2], *sB[3:], *sC[:2], *sC[3:], *grads)
    strides += (K, dim, n, H, W, nseg, nblk, rows, 1)  # (the last: ``one``)
    grid = (batch * K, triton.cdiv(dim, tile.block_d) * tile.nb, nblk)
    meta = dict(
        ACC=acc,
        BD=tile.block_d,
        BN=tile.block_n,
        NB=tile.nb,
        LANES=tile.lanes,
        T=tile.cols,
        SB_N=sB[2],
        SC_N=sC[2],
        FORM=form,
        HAS_D=D is not None,
        HAS_BIAS=bias is not None,
        SOFTPLUS=softplus,
        num_warps=tile.warps,
    )
    return strides, grid, meta


def _carry(st, dsum, A, K, dim, n, nblk, acc, bq, block_d, block_n, batch, reverse):
    """The carry pass between row blocks (:func:`_s2_carry_kernel`), on tiles of ``block_d`` channels and
    ``block_n`` states."""
    nb = triton.cdiv(triton.next_power_of_2(n), block_n)
    _s2_carry_kernel[(batch * K, triton.cdiv(dim, block_d) * nb)](
        st,
        dsum,
        A,
        K,
        dim,
        n,
        nblk,
        ACC=acc,
        BD=block_d,
        BN=block_n,
        NB=nb,
        BQ=bq,
        REVERSE=reverse,
        num_warps=scan2d_warps(block_d, block_n, bq),
    )


def fwd(x, delta, A, B, C, D, R, bias, dirs, softplus, form, save_ckpt, rows, block_d, block_n):
    """``(y (batch, K, d, H, W), ckpt (batch, K, d, nseg + 1, n, BQ) or empty, dsum (batch, K, d, nblk, BQ) or empty)``
    in the accumulation dtype; ``A, R (K, d, n)``, ``D, bias (K, d)`` or None contiguous; ``dirs`` the flattened
    ``(K, 3)`` direction table. The forward's own tile (:func:`neurodyn.ops.scan_2d.triton_op.scan2d_fwd_tile`);
    ``block_d, block_n`` are the backward's."""
    acc = _acc(x, delta, A, B, C, D, R, bias)
    f = _tdtype(acc)
    batch, dim, H, W, K, n, bq, nseg, nblk = _geometry(x, A, dirs, rows)
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
    st = x.new_empty(batch, K, dim, nblk, n, bq, dtype=f)  # the states leaving each row block (carry pass)
    spec = _spec(dirs, x.device)
    args = (x, delta, B, C, A, x if D is None else D, R, x if bias is None else bias, spec)
    strides, grid, meta = _launch(x, delta, B, C, None, tile, acc, form, D, bias, softplus, A, rows, nseg, nblk)
    if nblk > 1:
        _s2_fwd_kernel[grid](*args, y, y, st, dsum, *strides, **meta, PHASE=0, FROM_CARRY=False, SAVE_CKPT=False)
        _carry(st, dsum, A, K, dim, n, nblk, acc, bq, block_d, block_n, batch, False)
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


def bwd(x, delta, A, B, C, D, R, bias, dirs, softplus, form, ckpt, dsum, gy, rows, block_d, block_n):
    """``(gx, gdelta, gB, gC)`` like x, delta, B, C and ``(gA, gR (K, d, n), gD, gbias (K, d))``, all in the
    accumulation dtype; ``gy (batch, K, d, H, W)`` of any strides (0 along K: the directions' merged gradient);
    delta, B, C contiguous (the gradients are written in their layouts); ``ckpt`` holds every row's entering states.
    Its own tile (:func:`neurodyn.ops.scan_2d.triton_op.scan2d_bwd_tile`); ``block_d, block_n``: the carry pass's."""
    acc = _acc(x, delta, A, B, C, D, R, bias)
    f = _tdtype(acc)
    batch, dim, H, W, K, n, bq, nseg, nblk = _geometry(x, A, dirs, rows)
    tile = scan2d_bwd_tile(dim, n, bq)
    zeros = lambda t: torch.zeros(t.shape, dtype=f, device=t.device)  # noqa: E731
    gx, gl, gB, gC = zeros(x), zeros(delta), zeros(B), zeros(C)
    pA, pR = (x.new_zeros(batch, nblk, K, dim, n, dtype=f) for _ in range(2))
    pD, pb = (x.new_zeros(batch, nblk, tile.nb, K, dim, dtype=f) for _ in range(2))
    if x.numel() and gy.numel():
        spec = _spec(dirs, x.device)
        st = x.new_empty(batch, K, dim, nblk, n, bq, dtype=f) if nblk > 1 else gx
        args = (x, delta, B, C, A, x if D is None else D, R, x if bias is None else bias, spec, ckpt, st, gy, gx, gl)
        strides, grid, meta = _launch(x, delta, B, C, gy, tile, acc, form, D, bias, softplus, A, rows, nseg, nblk)
        if nblk > 1:
            _s2_bwd_kernel[grid](*args, gB, gC, pA, pR, pD, pb, *strides, **meta, PHASE=0, FROM_CARRY=False)
            _carry(st, dsum, A, K, dim, n, nblk, acc, bq, block_d, block_n, batch, True)
        _s2_bwd_kernel[grid](*args, gB, gC, pA, pR, pD, pb, *strides, **meta, PHASE=1, FROM_CARRY=nblk > 1)
    return gx, gl, gB, gC, pA.sum((0, 1)), pR.sum((0, 1)), pD.sum((0, 1, 2)), pb.sum((0, 1, 2))
