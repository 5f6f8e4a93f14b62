"""Triton kernels of the selective scan (forward, and backward by chunked recomputation), built like mamba-ssm's CUDA
kernel. Loaded by :func:`neurodyn.ops.triton_loader.load` only; the operators are in
:mod:`neurodyn.ops.selective_scan.triton_op` (and :mod:`neurodyn.ops.head_scan.triton_op`).

The recurrence, in scan order ``s = 0 .. L-1`` (time ``t = s``, or ``t = L-1-s`` when ``REVERSE``)::

    dt_s = softplus(delta_t + bias)   (or delta_t + bias)        a_s = exp(dt_s A),  x_s = w_s B_t u_t   (b, d, n)
    h_s  = a_s h_{s-1} + x_s            (h_{-1} = h0 or 0)
    y_t  = sum_n C_t h_s + D u_t        out_t = y_t silu(z_t)    (or y_t)

with the input factor ``w_s = dt_s`` (Mamba's Euler input) or, with ``ZOH``, the Kirchhoff cell's exact zero-order
hold ``w_s = (1 - a_s) / lambda = dt_s phi(dt_s lambda)``, ``lambda = -A > 0`` (:mod:`neurodyn.ops.knc_scan`;
``dw/ddt = a``, ``dw/dA = (w - dt a) / lambda = dt^2 psi``, :func:`_zoh`).

Layout (:func:`_standard_layout`): ``u, delta, z, out: (batch, d, L)``; ``A: (d, n)``; ``B, C``: ``(d, n)`` fixed
or ``(batch, G, n, L)`` (channel ``i`` in group ``i // (d / G)``); ``D, bias: (d,)``; ``h0, last: (batch, d, n)``;
all contiguous. The kernels address u-like tensors, delta, A, D and input-dependent B/C through strides (time
contiguous in delta and B/C), so that the multi-head scan's time-major u and y are read in place
(:func:`_head_layout`: batch and sets folded into the programs' batch index, a channel reading its head's step and
decay, the time stride ``SU_T`` a compile-time constant; its small dt, B and C are copied time-last first;
``HEAD``: one decay per channel for all its states, so the decays and their totals are computed once per step
instead of once per state). Inputs may be float16/bfloat16/float32/float64; each load is converted to the
accumulation dtype ``ACC`` (float32, or float64 when an input is float64).

Tiles. A program owns ``BD`` channels of one batch element and walks L in chunks of ``BL = LANES * T`` steps. A
chunk is a ``(BD, LANES, T)`` register tile: each thread holds ``T`` consecutive steps of one channel (time
in-thread), ``LANES`` threads of a warp cover the chunk, the other ``32 / LANES`` lanes and the warps hold further
channels. (Loaded as a ``(J, BD, LANES, K)`` tile, ``T = J K``, whose ``K`` steps are one vector load: Triton lays
it out with the lanes on ``LANES``, then ``BD``, and ``J`` in-thread; permuted and reshaped it is the chunk tile
with all ``T`` steps in one thread.) The ``n`` states are a loop inside the chunk; per state the kernel

  1. computes ``a = exp2(dt A log2 e)`` and ``x`` on the tile (one exponential per element), the thread's total
     decay ``exp2(A log2 e sum dt)`` (one per thread) and its total input by the in-thread recurrence (one fma per
     element: the reduction of the (a, x) pairs in scan order),
  2. scans the threads' totals across the ``LANES`` lanes (Kogge-Stone on warp shuffles, the state entering the
     chunk folded into the first lane), which gives each thread the state entering its steps,
  3. runs the recurrence over its steps (one fma per element) and accumulates ``y += C h`` in registers.

The state entering each chunk is passed between chunks through a small ring buffer in global memory (the states of
a chunk's loop cannot be indexed in registers), one barrier per chunk; with ``SAVE_CKPT`` it is also stored as the
checkpoint, ``ckpt: (batch, d, nchunks, n)``. Full chunks load and store without masks (a partial channel block
reads the last channel again and never stores it); the one partial chunk is a masked copy of the chunk body after
the loop.

Backward (the adjoint ``lam_s = dLoss/dh_s``)::

    lam_s   = C_t gy_t + a_{s+1} lam_{s+1},          lam_{L-1} = C gy + glast,   gy = gout silu(z) (or gout)
    gx_s = lam_s:  gu_t = sum_n lam_s w_s B_t + D gy_t,   gB_t = sum_{d in group} lam_s w_s u_t,
    gdt_s   = sum_n lam_s (A a_s h_{s-1} + dw/ddt B_t u_t),  gC_t = sum gy_t h_s,
    gA      = sum_{b,s} lam_s (dt_s a_s h_{s-1} + dw/dA B_t u_t),
    gz = gout y dsilu(z),  gdelta = gdt sigmoid(delta + bias) (softplus) or gdt,  gh0 = a_0 lam_0

The programs walk the chunks from the last to the first. Per state each runs the adjoint first, the same way as the
forward's scan but in reverse (the threads' totals scanned from the last lane; the carry ``a_first lam_first``
passed to the previous chunk through the ring buffer), then recomputes the chunk's states from the checkpoint and
adds each step's gradient terms as it goes (no tile of states is kept). The backward holds fewer steps per thread
(``T = 8``) than the forward so that it fits 168 registers (``MAXNREG_BWD``: 3 blocks of 4 warps per SM on sm_90)
without spilling. Per-channel partial sums over time (gA, fixed gB/gC, gD, gbias) are kept per lane and summed by
the launcher; input-dependent gB/gC are added per channel with (vector, on sm_90) atomics into an ``ACC`` buffer.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from neurodyn.ops.triton_loader import shared, target_arch

Tensor = torch.Tensor

common = shared()  # the chunk tile's helpers, fast math (this build's)

_helper = common.helper
_rsum = common.rsum
_rcp = common.rcp
_lg2 = common.lg2
_softplus = common.softplus
_tile = common.tile
_untile = common.untile
_pick = common.pick
_put = common.put
_from_lane = common.from_lane
_lane_prev = common.lane_prev
_has_prev = common.has_prev
_first_lane = common.first_lane
_lane_scan = common.lane_scan
_thread_entry = common.thread_entry
_chunk_adjoint = common.chunk_adjoint
_INTERPRETED = common.INTERPRETED
LOG2E, LN2, _LOG2E, _LN2 = common.LOG2E, common.LN2, common.LOG2E_VALUE, common.LN2_VALUE

# ZOH: below x = dt lambda = 1/4 the factors phi(x) = (1 - e^-x)/x and psi(x) = (phi - e^-x)/x come from
# polynomials, above from the closed forms w = (1 - a)/lambda, dw/dA = (w - dt a)/lambda, whose cancellation (the
# exponential's error over x and x^2) grows below. float32: minimax cubics on [0, 1/4] (relative error 2.9e-7 for
# phi = 1 + x (q0 + x (q1 + x q2)), 4.1e-7 for psi); the closed forms' error at the switch is about 7e-7 (phi) and
# 5e-6 (psi), as the series/closed-form switch of the previous kernels. float64: Taylor series of degree 8 below
# x = 1/20 (their coefficients ln2^k / (k+1)! and (k+1) ln2^k / (k+2)! in log2 units y = -x log2(e)).
ZOH_SWITCH = tl.constexpr(0.25)
PHI_Q0, PHI_Q1, PHI_Q2 = (
    tl.constexpr(-0.4999774552479961),
    tl.constexpr(0.16612117855438702),
    tl.constexpr(-0.03786209350713973),
)
PSI_P0, PSI_P1, PSI_P2, PSI_P3 = (
    tl.constexpr(0.49999979322404814),
    tl.constexpr(-0.3333075319474462),
    tl.constexpr(0.12448839123309334),
    tl.constexpr(-0.030033371846959277),
)
ZOH_SWITCH64 = tl.constexpr(-0.05 * _LOG2E)
_fact = [1.0]
for _k in range(1, 12):
    _fact.append(_fact[-1] * _k)
PHI64 = tuple(tl.constexpr(_LN2**k / _fact[k + 1]) for k in range(9))
PSI64 = tuple(tl.constexpr((k + 1) * _LN2**k / _fact[k + 2]) for k in range(9))


# ---------------------------------------------------------------------------------------------------------------


@_helper
def _silu_parts(z):
    """``(z sigmoid(z), sigmoid(z))``."""
    sg = _rcp(1.0 + tl.exp2(-z * LOG2E))
    return z * sg, sg


@_helper
def _horner9(
    y,
    c0: tl.constexpr,
    c1: tl.constexpr,
    c2: tl.constexpr,
    c3: tl.constexpr,
    c4: tl.constexpr,
    c5: tl.constexpr,
    c6: tl.constexpr,
    c7: tl.constexpr,
    c8: tl.constexpr,
):
    p = c8 * y + c7
    p = (p * y + c6) * y + c5
    p = (p * y + c4) * y + c3
    p = (p * y + c2) * y + c1
    return p * y + c0


@_helper
def _zoh(dt, dt2, a, y, A, GRAD: tl.constexpr):
    """The ZOH input factor ``w = dt phi(x)`` and, with ``GRAD``, ``dw/dA = dt^2 psi(x)`` (else 0) at
    ``x = dt lambda``, ``lambda = -A`` (``A (BD,)``), from ``dt``, ``dt2 = dt^2``, ``a = exp(-x)`` and
    ``y = -x log2(e)`` on the tile: the polynomials below the switch (module constants; float32 in ``dt`` with
    the state's coefficients ``q_k lambda^(k+1)``, three fmas), the closed forms above."""
    lam = -A
    inv = _rcp(lam)[:, None, None]
    if dt.dtype == tl.float64:
        small = y > ZOH_SWITCH64
        w_s = dt * _horner9(y, PHI64[0], PHI64[1], PHI64[2], PHI64[3], PHI64[4], PHI64[5], PHI64[6], PHI64[7], PHI64[8])
    else:
        small = dt < inv * ZOH_SWITCH
        l2 = lam * lam
        e1 = (lam * PHI_Q0)[:, None, None]
        e2 = (l2 * PHI_Q1)[:, None, None]
        e3 = (l2 * lam * PHI_Q2)[:, None, None]
        w_s = dt2 * ((e3 * dt + e2) * dt + e1) + dt
    w = tl.where(small, w_s, inv - a * inv)
    wA = w * 0.0
    if GRAD:
        if dt.dtype == tl.float64:
            psi = _horner9(y, PSI64[0], PSI64[1], PSI64[2], PSI64[3], PSI64[4], PSI64[5], PSI64[6], PSI64[7], PSI64[8])
        else:
            f1 = (lam * PSI_P1)[:, None, None]
            f2 = (l2 * PSI_P2)[:, None, None]
            f3 = (l2 * lam * PSI_P3)[:, None, None]
            psi = ((f3 * dt + f2) * dt + f1) * dt + PSI_P0
        wA = tl.where(small, dt2 * psi, (w - dt * a) * inv)
    return w, wA


# ---------------------------------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------------------------------
# addressing. Loads use the program's channels clamped to the last one (a partial channel block reads valid memory
# and needs no mask; its extra channels are never stored) and, but for the one partial chunk, no time mask: a full
# chunk's loads and stores are unpredicated vector accesses.


@_helper
def _positions(J: tl.constexpr, LANES: tl.constexpr, K: tl.constexpr):
    """The in-chunk position ``(J, 1, LANES, K)`` of every element of a loaded ``(J, BD, LANES, K)`` tile."""
    T: tl.constexpr = J * K
    return (
        tl.arange(0, LANES)[None, None, :, None] * T
        + tl.arange(0, J)[:, None, None, None] * K
        + tl.arange(0, K)[None, None, None, :]
    )


@_helper
def _chunk_start(c, L, BL: tl.constexpr, REVERSE: tl.constexpr):
    """The first time of chunk ``c`` (scan order) in memory order: a reverse chunk is scanned from its end, so
    that loads stay vector loads either way."""
    if REVERSE:
        return L - (c + 1) * BL
    else:
        return c * BL


@_helper
def _time_mask(t4, L, md4, MASKED: tl.constexpr):
    if MASKED:
        return md4 & (t4 >= 0) & (t4 < L)
    else:
        return md4


@_helper
def _load(
    ptr, off4, t4, L, MASKED: tl.constexpr, ACC: tl.constexpr, BD: tl.constexpr, LANES: tl.constexpr, T: tl.constexpr
):
    """The ``(BD, LANES, T)`` chunk tile at offsets ``off4``; outside ``[0, L)`` 0 (only in the ``MASKED`` chunk)."""
    if MASKED:
        x = tl.load(ptr + off4, mask=(t4 >= 0) & (t4 < L), other=0.0)
    else:
        x = tl.load(ptr + off4)
    return _tile(x.to(ACC), BD, LANES, T)


@_helper
def _store(ptr, off4, val, mask4, BD: tl.constexpr, LANES: tl.constexpr, J: tl.constexpr, K: tl.constexpr):
    tl.store(ptr + off4, _untile(val, BD, LANES, J, K).to(ptr.dtype.element_ty), mask=mask4)


if _INTERPRETED:

    def _prefetch(ptrs):
        pass
else:

    @triton.jit
    def _prefetch(ptrs):
        """Ask L2 for the lines at ``ptrs`` (``prefetch.global.L2``, no register written back): the next chunk's
        streams are on their way from DRAM while this chunk computes. Triton's pipeliner leaves these loops alone
        (it stages loads that feed dots), so this is the overlap of the next chunk's loads with the current one."""
        tl.inline_asm_elementwise(
            "prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l", [ptrs], dtype=tl.int32, is_pure=False, pack=1
        )


@_helper
def _prefetch_chunk(ptr, row4, c, L, LANES: tl.constexpr, J: tl.constexpr, K: tl.constexpr, REVERSE: tl.constexpr):
    """Prefetch chunk ``c`` (a full one, the next to be processed) of a time-contiguous stream whose rows are
    ``row4 (1, BD, 1, 1)``: one address per ``K``-step vector of each thread (``J`` per thread)."""
    T: tl.constexpr = J * K
    t0 = _chunk_start(c, L, LANES * T, REVERSE)
    _prefetch(
        ptr + (row4 + t0 + tl.arange(0, LANES)[None, None, :, None] * T + tl.arange(0, J)[:, None, None, None] * K)
    )


@_helper
def _valid(t4, L, BD: tl.constexpr, LANES: tl.constexpr, T: tl.constexpr):
    m = (t4 >= 0) & (t4 < L)
    return _tile(tl.broadcast_to(m, (m.shape[0], BD, LANES, m.shape[3])), BD, LANES, T)


@_helper
def _coef(
    ptr,
    row,
    fixed_off,
    nn,
    s_n,
    t4,
    L,
    MASKED: tl.constexpr,
    ACC: tl.constexpr,
    VAR: tl.constexpr,
    BD: tl.constexpr,
    LANES: tl.constexpr,
    T: tl.constexpr,
):
    """B or C of state ``nn``: the ``(BD, LANES, T)`` tile of input-dependent values (``row``: the channel's group
    row, ``(1, BD, 1, 1)``) or the fixed ``(BD,)`` column at ``fixed_off + nn``, broadcast."""
    if VAR:
        return _load(ptr, row + nn * s_n + t4, t4, L, MASKED, ACC, BD, LANES, T)
    else:
        return tl.load(ptr + fixed_off + nn).to(ACC)[:, None, None]


@_helper
def _program(
    dim,
    n,
    su_b,
    su_d,
    hsu_d,
    sd_b,
    sd_d,
    dt_div,
    sets,
    sa_s,
    sa_d,
    sD_s,
    gb_size,
    sb_b,
    sb_g,
    gc_size,
    sc_b,
    sc_g,
    BD: tl.constexpr,
    HEAD: tl.constexpr,
):
    """The program's batch index and channels and the row offsets of its channels: ``(b, offs_d, dc, mask_d, urow,
    drow, arow, Drow, brow, crow, fixed)`` (``dc``: the channels clamped to the last; offsets 64-bit; u-like and
    delta rows ``(1, BD, 1, 1)``, B/C group rows the same, A's and D's ``(BD,)``, ``fixed``: rows of fixed (d, n)
    tensors). In the head layout the channels are
    contiguous in memory: their stride is ``hsu_d``, an argument Triton does not specialise, so that it keeps the
    tile's layout (time in-thread) rather than vectorising across channels."""
    b = tl.program_id(0).to(tl.int64)
    offs_d = tl.program_id(1) * BD + tl.arange(0, BD)
    dc = tl.minimum(offs_d, dim - 1).to(tl.int64)
    if HEAD:
        urow = b * su_b + dc * hsu_d
    else:
        urow = b * su_b + dc * su_d
    drow = b * sd_b + (dc // dt_div) * sd_d
    arow = (b % sets) * sa_s + (dc // dt_div) * sa_d
    brow = b * sb_b + (dc // gb_size) * sb_g
    crow = b * sc_b + (dc // gc_size) * sc_g
    return (
        b,
        offs_d,
        dc,
        offs_d < dim,
        urow[None, :, None, None],
        drow[None, :, None, None],
        arow,
        (b % sets) * sD_s + dc,
        brow[None, :, None, None],
        crow[None, :, None, None],
        dc * n,
    )


@_helper
def _step(
    delta_ptr,
    off4,
    t4,
    L,
    bias,
    MASKED: tl.constexpr,
    ACC: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    SOFTPLUS: tl.constexpr,
    BD: tl.constexpr,
    LANES: tl.constexpr,
    T: tl.constexpr,
):
    """``(pre-activation, dt, e, 1 + e)`` on the tile (``e = exp(pre)`` with ``SOFTPLUS``); dt is 0 outside the
    sequence (so that the decay there is 1 and the input 0)."""
    pre = _load(delta_ptr, off4, t4, L, MASKED, ACC, BD, LANES, T)
    if HAS_BIAS:
        pre = pre + bias[:, None, None]
    dt = pre
    e = pre
    w = pre
    if SOFTPLUS:
        dt, e, w = _softplus(pre)
    if MASKED:
        dt = tl.where(_valid(t4, L, BD, LANES, T), dt, 0.0)
    return pre, dt, e, w


# ---------------------------------------------------------------------------------------------------------------
# forward


@_helper
def _fwd_chunk(
    c,
    nfull,
    u_ptr,
    delta_ptr,
    A_ptr,
    B_ptr,
    C_ptr,
    z_ptr,
    out_ptr,
    ckpt_ptr,
    ring_ptr,
    L,
    n,
    nchunks,
    sa_n,
    sb_n,
    sc_n,
    offs_d,
    mask_d,
    lane,
    pU,
    pC,
    urow,
    drow,
    arow,
    brow,
    crow,
    fixed,
    bias,
    Dv,
    A2_h,
    ring,
    ck,
    ACC: tl.constexpr,
    BD: tl.constexpr,
    LANES: tl.constexpr,
    JU: tl.constexpr,
    KU: tl.constexpr,
    JC: tl.constexpr,
    KC: tl.constexpr,
    SU_T: tl.constexpr,
    B_VAR: tl.constexpr,
    C_VAR: tl.constexpr,
    HAS_Z: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    SOFTPLUS: tl.constexpr,
    REVERSE: tl.constexpr,
    SAVE_CKPT: tl.constexpr,
    ZOH: tl.constexpr,
    HEAD: tl.constexpr,
    MASKED: tl.constexpr,
):
    """Chunk ``c`` of the forward: its ``out`` and the states leaving it (into the ring)."""
    T: tl.constexpr = JU * KU
    t0 = _chunk_start(c, L, LANES * T, REVERSE)
    tU = t0 + pU
    tC = t0 + pC
    if not MASKED and not HEAD:  # (the next full chunk's streams, into L2)
        nxt = tl.minimum(c + 1, nfull - 1)
        _prefetch_chunk(u_ptr, urow, nxt, L, LANES, JU, KU, REVERSE)
        _prefetch_chunk(delta_ptr, drow, nxt, L, LANES, JC, KC, REVERSE)
        if HAS_Z:
            _prefetch_chunk(z_ptr, urow, nxt, L, LANES, JU, KU, REVERSE)
    u = _load(u_ptr, urow + tU * SU_T, tU, L, MASKED, ACC, BD, LANES, T)
    pre, dt, e, w1 = _step(delta_ptr, drow + tC, tC, L, bias, MASKED, ACC, HAS_BIAS, SOFTPLUS, BD, LANES, T)
    dtu = dt * u
    dts = _rsum(dt, 2)
    dt2 = dt * dt  # (ZOH)
    y = Dv[:, None, None] * u
    if HEAD:  # one decay for all states: computed once per step
        a_h = tl.exp2(dt * A2_h[:, None, None])
        TA_h = tl.exp2(dts * A2_h[:, None])
    rd = ring + (c % 2) * n
    wr = ring + ((c + 1) % 2) * n
    for nn in range(n):
        h_in = tl.load(ring_ptr + rd + nn)
        if SAVE_CKPT:
            tl.store(ckpt_ptr + ck + c * n + nn, h_in, mask=mask_d)
        Bn = _coef(B_ptr, brow, fixed, nn, sb_n, tC, L, MASKED, ACC, B_VAR, BD, LANES, T)
        if HEAD:
            a = a_h
            TA = TA_h
            x = dtu * Bn
        else:
            A = tl.load(A_ptr + arow + nn * sa_n).to(ACC)
            A2 = A * LOG2E
            y2 = dt * A2[:, None, None]
            a = tl.exp2(y2)
            TA = tl.exp2(dts * A2[:, None])
            if ZOH:
                w, _wA = _zoh(dt, dt2, a, y2, A, False)
                x = w * (Bn * u)
            else:
                x = dtu * Bn
        h, exit = _thread_entry(a, x, TA, h_in, lane, T, LANES, REVERSE)
        tl.store(ring_ptr + wr[:, None] + nn + 0 * lane[None, :], exit, mask=mask_d[:, None] & (lane == 0)[None, :])
        hs = x
        for q in tl.static_range(T):
            h = _pick(a, q, T, REVERSE) * h + _pick(x, q, T, REVERSE)
            hs = _put(hs, h, q, T, REVERSE)
        Cn = _coef(C_ptr, crow, fixed, nn, sc_n, tC, L, MASKED, ACC, C_VAR, BD, LANES, T)
        y += Cn * hs
    if HAS_Z:
        sz, _sg = _silu_parts(_load(z_ptr, urow + tU * SU_T, tU, L, MASKED, ACC, BD, LANES, T))
        y = y * sz
    _store(out_ptr, urow + tU * SU_T, y, _time_mask(tU, L, mask_d[None, :, None, None], MASKED), BD, LANES, JU, KU)


@triton.jit(do_not_specialize=["hsu_d"])
def _selective_scan_fwd_kernel(
    u_ptr,
    delta_ptr,
    A_ptr,
    B_ptr,
    C_ptr,
    D_ptr,
    z_ptr,
    bias_ptr,
    h0_ptr,
    out_ptr,
    last_ptr,
    ckpt_ptr,
    ring_ptr,
    dim,
    L,
    n,
    nchunks,
    su_b,
    su_d,
    hsu_d,
    sd_b,
    sd_d,
    dt_div,
    sets,
    sa_s,
    sa_d,
    sa_n,
    sD_s,
    gb_size,
    sb_b,
    sb_g,
    sb_n,
    gc_size,
    sc_b,
    sc_g,
    sc_n,
    ACC: tl.constexpr,
    BD: tl.constexpr,
    LANES: tl.constexpr,
    JU: tl.constexpr,
    KU: tl.constexpr,
    JC: tl.constexpr,
    KC: tl.constexpr,
    SU_T: tl.constexpr,
    B_VAR: tl.constexpr,
    C_VAR: tl.constexpr,
    HAS_D: tl.constexpr,
    HAS_Z: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_H0: tl.constexpr,
    SOFTPLUS: tl.constexpr,
    REVERSE: tl.constexpr,
    SAVE_CKPT: tl.constexpr,
    ZOH: tl.constexpr,
    HEAD: tl.constexpr,
):
    T: tl.constexpr = JU * KU
    BL: tl.constexpr = LANES * T
    b, offs_d, dc, mask_d, urow, drow, arow, Drow, brow, crow, fixed = _program(
        dim,
        n,
        su_b,
        su_d,
        hsu_d,
        sd_b,
        sd_d,
        dt_div,
        sets,
        sa_s,
        sa_d,
        sD_s,
        gb_size,
        sb_b,
        sb_g,
        gc_size,
        sc_b,
        sc_g,
        BD,
        HEAD,
    )
    lane = tl.arange(0, LANES)
    pU = _positions(JU, LANES, KU)
    pC = _positions(JC, LANES, KC)
    bias = tl.full((BD,), 0.0, ACC)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + dc).to(ACC)
    Dv = tl.full((BD,), 0.0, ACC)
    if HAS_D:
        Dv = tl.load(D_ptr + Drow).to(ACC)
    bdn = (b * dim + offs_d) * n  # rows of (batch, d, n) tensors
    ring = (b * dim + offs_d) * (2 * n)  # (batch, d, 2, n): the state entering the chunk, ping-pong
    ck = (b * dim + dc) * (nchunks * n)
    for nn in range(n):
        h = tl.full((BD,), 0.0, ACC)
        if HAS_H0:
            h = tl.load(h0_ptr + bdn + nn, mask=mask_d, other=0.0).to(ACC)
        tl.store(ring_ptr + ring + nn, h, mask=mask_d)
    A2_h = tl.load(A_ptr + arow).to(ACC) * LOG2E  # (HEAD: the decay of every state)
    ring = (b * dim + dc) * (2 * n)  # (loads of the extra channels: the last one's)
    nfull = L // BL
    for c in range(nfull):
        tl.debug_barrier()  # (the ring was written by other threads)
        _fwd_chunk(
            c,
            nfull,
            u_ptr,
            delta_ptr,
            A_ptr,
            B_ptr,
            C_ptr,
            z_ptr,
            out_ptr,
            ckpt_ptr,
            ring_ptr,
            L,
            n,
            nchunks,
            sa_n,
            sb_n,
            sc_n,
            offs_d,
            mask_d,
            lane,
            pU,
            pC,
            urow,
            drow,
            arow,
            brow,
            crow,
            fixed,
            bias,
            Dv,
            A2_h,
            ring,
            ck,
            ACC,
            BD,
            LANES,
            JU,
            KU,
            JC,
            KC,
            SU_T,
            B_VAR,
            C_VAR,
            HAS_Z,
            HAS_BIAS,
            SOFTPLUS,
            REVERSE,
            SAVE_CKPT,
            ZOH,
            HEAD,
            False,
        )
    if nfull < nchunks:  # the partial chunk: masked loads
        tl.debug_barrier()
        _fwd_chunk(
            nfull,
            nfull,
            u_ptr,
            delta_ptr,
            A_ptr,
            B_ptr,
            C_ptr,
            z_ptr,
            out_ptr,
            ckpt_ptr,
            ring_ptr,
            L,
            n,
            nchunks,
            sa_n,
            sb_n,
            sc_n,
            offs_d,
            mask_d,
            lane,
            pU,
            pC,
            urow,
            drow,
            arow,
            brow,
            crow,
            fixed,
            bias,
            Dv,
            A2_h,
            ring,
            ck,
            ACC,
            BD,
            LANES,
            JU,
            KU,
            JC,
            KC,
            SU_T,
            B_VAR,
            C_VAR,
            HAS_Z,
            HAS_BIAS,
            SOFTPLUS,
            REVERSE,
            SAVE_CKPT,
            ZOH,
            HEAD,
            True,
        )
    tl.debug_barrier()
    fin = ring + (nchunks % 2) * n
    for nn in range(n):
        tl.store(last_ptr + bdn + nn, tl.load(ring_ptr + fin + nn), mask=mask_d)


# ---------------------------------------------------------------------------------------------------------------
# backward


@_helper
def _bwd_chunk(
    c,
    i,
    u_ptr,
    delta_ptr,
    A_ptr,
    B_ptr,
    C_ptr,
    z_ptr,
    ckpt_ptr,
    gout_ptr,
    ring_ptr,
    gu_ptr,
    gdelta_ptr,
    gz_ptr,
    gA_ptr,
    gB_ptr,
    gC_ptr,
    L,
    n,
    sa_n,
    sb_n,
    sc_n,
    offs_d,
    mask_d,
    lane,
    pU,
    pC,
    urow,
    drow,
    arow,
    brow,
    crow,
    fixed,
    bias,
    Dv,
    A_h,
    ring,
    ck,
    part,
    gD,
    gbias,
    ACC: tl.constexpr,
    BD: tl.constexpr,
    LANES: tl.constexpr,
    JU: tl.constexpr,
    KU: tl.constexpr,
    JC: tl.constexpr,
    KC: tl.constexpr,
    SU_T: tl.constexpr,
    B_VAR: tl.constexpr,
    C_VAR: tl.constexpr,
    HAS_Z: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    SOFTPLUS: tl.constexpr,
    REVERSE: tl.constexpr,
    ZOH: tl.constexpr,
    HEAD: tl.constexpr,
    MASKED: tl.constexpr,
):
    """Chunk ``c`` (the ``i``-th processed) of the backward: its gu, gdelta, gz, its terms of the partial sums and
    the adjoint's carry to the previous chunk (into the ring). Returns the updated ``(gD, gbias)`` partials."""
    T: tl.constexpr = JU * KU
    t0 = _chunk_start(c, L, LANES * T, REVERSE)
    tU = t0 + pU
    tC = t0 + pC
    if not MASKED and not HEAD:  # (the next full chunk's streams, into L2: the chunks run from the last)
        nxt = tl.maximum(c - 1, 0)
        _prefetch_chunk(u_ptr, urow, nxt, L, LANES, JU, KU, REVERSE)
        _prefetch_chunk(delta_ptr, drow, nxt, L, LANES, JC, KC, REVERSE)
        _prefetch_chunk(gout_ptr, urow, nxt, L, LANES, JU, KU, REVERSE)
        if HAS_Z:
            _prefetch_chunk(z_ptr, urow, nxt, L, LANES, JU, KU, REVERSE)
    m4 = _time_mask(tU, L, mask_d[None, :, None, None], MASKED)
    ml = mask_d[:, None] & (lane >= 0)[None, :]
    u = _load(u_ptr, urow + tU * SU_T, tU, L, MASKED, ACC, BD, LANES, T)
    pre, dt, e, w1 = _step(delta_ptr, drow + tC, tC, L, bias, MASKED, ACC, HAS_BIAS, SOFTPLUS, BD, LANES, T)
    sig = e  # d softplus / d pre
    if SOFTPLUS:
        sig = e * _rcp(w1)
    gy = _load(gout_ptr, urow + tU * SU_T, tU, L, MASKED, ACC, BD, LANES, T)
    if HAS_Z:
        sz, _sg = _silu_parts(_load(z_ptr, urow + tU * SU_T, tU, L, MASKED, ACC, BD, LANES, T))
        gy = gy * sz
    gD += _rsum(gy * u, 2)
    dts = _rsum(dt, 2)
    dt2 = dt * dt  # (ZOH)
    # dt of the next thread's first step (scan order; 0 past the chunk's last lane, whose successor is the carry)
    dt_f = _pick(dt, 0, T, REVERSE)
    dt_n = tl.where(_first_lane(lane, LANES, not REVERSE), 0.0, _lane_prev(dt_f, lane, 1, LANES, not REVERSE))
    dts_b = dts - dt_f + dt_n
    if ZOH:
        ux = u  # ZOH keeps u (x = w B u)
    else:
        ux = dt * u  # Euler keeps dt u (x = dt u B; u is reloaded at the end)
    acc_lb = dt * 0.0  # sum_n lam w B   (Euler: sum_n lam B, times dt at the end)
    acc_gdt = dt * 0.0  # sum_n lam (A a h_prev + dw/ddt B u)   (Euler: the first term; + u acc_lb at the end)
    acc_y = Dv[:, None, None] * u
    if HEAD:
        A2h = A_h * LOG2E
        a_h = tl.exp2(dt * A2h[:, None, None])
        TA_h = tl.exp2(dts * A2h[:, None])
        TB_h = tl.exp2(dts_b * A2h[:, None])
        an_h = tl.exp2(dt_n * A2h[:, None])
    rd = ring + (i % 2) * n
    wr = ring + ((i + 1) % 2) * n
    mt = _time_mask(tC, L, mask_d[None, :, None, None], MASKED)
    for nn in range(n):
        h_in = tl.load(ckpt_ptr + ck + c * n + nn).to(ACC)
        mu = tl.load(ring_ptr + rd + nn)
        if HEAD:
            A = A_h
            a = a_h
            TA = TA_h
            TB = TB_h
            a_next = an_h
        else:
            A = tl.load(A_ptr + arow + nn * sa_n).to(ACC)
            A2 = A * LOG2E
            y2 = dt * A2[:, None, None]
            a = tl.exp2(y2)
            TA = tl.exp2(dts * A2[:, None])
            TB = tl.exp2(dts_b * A2[:, None])
            a_next = tl.exp2(dt_n * A2[:, None])
        # the adjoint first (it needs only the decays and C gy), then the states step by step with their terms
        Cn = _coef(C_ptr, crow, fixed, nn, sc_n, tC, L, MASKED, ACC, C_VAR, BD, LANES, T)
        lams, carry = _chunk_adjoint(a, Cn * gy, TB, a_next, mu, lane, T, LANES, REVERSE)
        tl.store(ring_ptr + wr[:, None] + nn + 0 * lane[None, :], carry, mask=mask_d[:, None] & (lane == 0)[None, :])
        Bn = _coef(B_ptr, brow, fixed, nn, sb_n, tC, L, MASKED, ACC, B_VAR, BD, LANES, T)
        if ZOH:
            w, wA = _zoh(dt, dt2, a, y2, A, True)
            bu = Bn * u
            x = w * bu
            lw = lams * w
            acc_lb += lw * Bn
        else:
            x = ux * Bn
            acc_lb += lams * Bn
        h, _exit = _thread_entry(a, x, TA, h_in, lane, T, LANES, REVERSE)
        gA_n = dts * 0.0
        gCe = gy
        for q in tl.static_range(T):
            a_q = _pick(a, q, T, REVERSE)
            lam_q = _pick(lams, q, T, REVERSE)
            ah = a_q * h
            h = ah + _pick(x, q, T, REVERSE)
            if ZOH:
                bu_q = _pick(bu, q, T, REVERSE)
                inner = A[:, None] * ah + a_q * bu_q
                acc_gdt = _put(acc_gdt, _pick(acc_gdt, q, T, REVERSE) + lam_q * inner, q, T, REVERSE)
                gA_n += lam_q * (_pick(dt, q, T, REVERSE) * ah + _pick(wA, q, T, REVERSE) * bu_q)
            else:
                S = lam_q * ah
                acc_gdt = _put(acc_gdt, _pick(acc_gdt, q, T, REVERSE) + A[:, None] * S, q, T, REVERSE)
                gA_n += _pick(dt, q, T, REVERSE) * S
            gCe = _put(gCe, _pick(gy, q, T, REVERSE) * h, q, T, REVERSE)
            if HAS_Z:
                acc_y = _put(acc_y, _pick(acc_y, q, T, REVERSE) + _pick(Cn, q, T, REVERSE) * h, q, T, REVERSE)
        if ZOH:
            gBe = lw * u
        else:
            gBe = lams * ux
        gp = gA_ptr + part + nn
        tl.store(gp, tl.load(gp) + gA_n, mask=ml)
        if B_VAR:
            tl.atomic_add(gB_ptr + brow + nn * sb_n + tC, _untile(gBe, BD, LANES, JC, KC), mask=mt, sem="relaxed")
        else:
            gp = gB_ptr + part + nn
            tl.store(gp, tl.load(gp) + _rsum(gBe, 2), mask=ml)
        if C_VAR:
            tl.atomic_add(gC_ptr + crow + nn * sc_n + tC, _untile(gCe, BD, LANES, JC, KC), mask=mt, sem="relaxed")
        else:
            gp = gC_ptr + part + nn
            tl.store(gp, tl.load(gp) + _rsum(gCe, 2), mask=ml)
    if ZOH:
        gu = acc_lb + Dv[:, None, None] * gy
        gdt = acc_gdt
    else:
        u = _load(u_ptr, urow + tU * SU_T, tU, L, MASKED, ACC, BD, LANES, T)
        gu = dt * acc_lb + Dv[:, None, None] * gy
        gdt = acc_gdt + u * acc_lb
    if SOFTPLUS:
        gdt = gdt * sig
    if MASKED:
        gdt = tl.where(_valid(tC, L, BD, LANES, T), gdt, 0.0)
    gbias += _rsum(gdt, 2)
    _store(gu_ptr, urow + tU * SU_T, gu, m4, BD, LANES, JU, KU)
    _store(gdelta_ptr, urow + tU * SU_T, gdt, m4, BD, LANES, JU, KU)
    if HAS_Z:
        go = _load(gout_ptr, urow + tU * SU_T, tU, L, MASKED, ACC, BD, LANES, T)
        zz = _load(z_ptr, urow + tU * SU_T, tU, L, MASKED, ACC, BD, LANES, T)
        _sz, sg = _silu_parts(zz)
        _store(gz_ptr, urow + tU * SU_T, go * acc_y * sg * (1.0 + zz * (1.0 - sg)), m4, BD, LANES, JU, KU)
    return gD, gbias


@triton.jit(do_not_specialize=["hsu_d"])
def _selective_scan_bwd_kernel(
    u_ptr,
    delta_ptr,
    A_ptr,
    B_ptr,
    C_ptr,
    D_ptr,
    z_ptr,
    bias_ptr,
    ckpt_ptr,
    gout_ptr,
    glast_ptr,
    ring_ptr,
    gu_ptr,
    gdelta_ptr,
    gz_ptr,
    gh0_ptr,
    gA_ptr,
    gB_ptr,
    gC_ptr,
    gD_ptr,
    gbias_ptr,
    dim,
    L,
    n,
    nchunks,
    su_b,
    su_d,
    hsu_d,
    sd_b,
    sd_d,
    dt_div,
    sets,
    sa_s,
    sa_d,
    sa_n,
    sD_s,
    gb_size,
    sb_b,
    sb_g,
    sb_n,
    gc_size,
    sc_b,
    sc_g,
    sc_n,
    ACC: tl.constexpr,
    BD: tl.constexpr,
    LANES: tl.constexpr,
    JU: tl.constexpr,
    KU: tl.constexpr,
    JC: tl.constexpr,
    KC: tl.constexpr,
    SU_T: tl.constexpr,
    B_VAR: tl.constexpr,
    C_VAR: tl.constexpr,
    HAS_D: tl.constexpr,
    HAS_Z: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_H0: tl.constexpr,
    HAS_GLAST: tl.constexpr,
    SOFTPLUS: tl.constexpr,
    REVERSE: tl.constexpr,
    ZOH: tl.constexpr,
    HEAD: tl.constexpr,
):
    T: tl.constexpr = JU * KU
    BL: tl.constexpr = LANES * T
    b, offs_d, dc, mask_d, urow, drow, arow, Drow, brow, crow, fixed = _program(
        dim,
        n,
        su_b,
        su_d,
        hsu_d,
        sd_b,
        sd_d,
        dt_div,
        sets,
        sa_s,
        sa_d,
        sD_s,
        gb_size,
        sb_b,
        sb_g,
        gc_size,
        sc_b,
        sc_g,
        BD,
        HEAD,
    )
    lane = tl.arange(0, LANES)
    pU = _positions(JU, LANES, KU)
    pC = _positions(JC, LANES, KC)
    ml = mask_d[:, None] & (lane >= 0)[None, :]
    bias = tl.full((BD,), 0.0, ACC)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + dc).to(ACC)
    Dv = tl.full((BD,), 0.0, ACC)
    if HAS_D:
        Dv = tl.load(D_ptr + Drow).to(ACC)
    bdn = (b * dim + offs_d) * n
    ring = (b * dim + offs_d) * (2 * n)
    ck = (b * dim + dc) * (nchunks * n)
    # per-lane partial sums: (batch, d, LANES, n) for gA and fixed gB/gC, (batch, d, LANES) for gD and gbias; the
    # extra channels of a partial block read and write the last channel's slots but never store (masked)
    part = ((b * dim + dc) * LANES)[:, None] * n + lane[None, :] * n
    for nn in range(n):
        mu = tl.full((BD,), 0.0, ACC)
        if HAS_GLAST:
            mu = tl.load(glast_ptr + bdn + nn, mask=mask_d, other=0.0).to(ACC)
        tl.store(ring_ptr + ring + nn, mu, mask=mask_d)
    ring = (b * dim + dc) * (2 * n)
    gD = tl.full((BD, LANES), 0.0, ACC)
    gbias = tl.full((BD, LANES), 0.0, ACC)
    A_h = tl.load(A_ptr + arow).to(ACC)  # (HEAD: the decay of every state)
    nfull = L // BL
    ntail = nchunks - nfull
    if ntail > 0:  # the partial chunk, processed first: masked loads
        tl.debug_barrier()
        gD, gbias = _bwd_chunk(
            nfull,
            0,
            u_ptr,
            delta_ptr,
            A_ptr,
            B_ptr,
            C_ptr,
            z_ptr,
            ckpt_ptr,
            gout_ptr,
            ring_ptr,
            gu_ptr,
            gdelta_ptr,
            gz_ptr,
            gA_ptr,
            gB_ptr,
            gC_ptr,
            L,
            n,
            sa_n,
            sb_n,
            sc_n,
            offs_d,
            mask_d,
            lane,
            pU,
            pC,
            urow,
            drow,
            arow,
            brow,
            crow,
            fixed,
            bias,
            Dv,
            A_h,
            ring,
            ck,
            part,
            gD,
            gbias,
            ACC,
            BD,
            LANES,
            JU,
            KU,
            JC,
            KC,
            SU_T,
            B_VAR,
            C_VAR,
            HAS_Z,
            HAS_BIAS,
            SOFTPLUS,
            REVERSE,
            ZOH,
            HEAD,
            True,
        )
    for j in range(nfull):
        tl.debug_barrier()
        gD, gbias = _bwd_chunk(
            nfull - 1 - j,
            j + ntail,
            u_ptr,
            delta_ptr,
            A_ptr,
            B_ptr,
            C_ptr,
            z_ptr,
            ckpt_ptr,
            gout_ptr,
            ring_ptr,
            gu_ptr,
            gdelta_ptr,
            gz_ptr,
            gA_ptr,
            gB_ptr,
            gC_ptr,
            L,
            n,
            sa_n,
            sb_n,
            sc_n,
            offs_d,
            mask_d,
            lane,
            pU,
            pC,
            urow,
            drow,
            arow,
            brow,
            crow,
            fixed,
            bias,
            Dv,
            A_h,
            ring,
            ck,
            part,
            gD,
            gbias,
            ACC,
            BD,
            LANES,
            JU,
            KU,
            JC,
            KC,
            SU_T,
            B_VAR,
            C_VAR,
            HAS_Z,
            HAS_BIAS,
            SOFTPLUS,
            REVERSE,
            ZOH,
            HEAD,
            False,
        )
    tl.debug_barrier()
    if HAS_H0:  # gh0 = a_0 lam_0: the carry out of the first chunk
        fin = ring + (nchunks % 2) * n
        for nn in range(n):
            tl.store(gh0_ptr + bdn + nn, tl.load(ring_ptr + fin + nn), mask=mask_d)
    pl = ((b * dim + offs_d) * LANES)[:, None] + lane[None, :]
    tl.store(gD_ptr + pl, gD, mask=ml)
    tl.store(gbias_ptr + pl, gbias, mask=ml)


# ---------------------------------------------------------------------------------------------------------------
# launchers (arguments prepared by neurodyn.ops.selective_scan.triton_op: contiguous, B/C 2-D or 4-D)

FWD_STEPS = 16  # steps per thread in the forward (float32)
BWD_STEPS = 8  # ... in the backward (its per-step state is larger: 8 keeps it near 160 registers)
# registers per thread the backward may use on sm_90 and later: 3 blocks of 4 warps per SM (65,536 registers), where
# ptxas fits it without spilling. (sm_80 has no vector atomics: Triton stages the gB/gC atomics through shared memory
# there, which needs more registers; it runs uncapped, 2 blocks per SM.)
MAXNREG_BWD = 168


def _acc(*tensors) -> tl.dtype:
    return tl.float64 if any(t is not None and t.dtype == torch.float64 for t in tensors) else tl.float32


def geometry(block_l: int, block_d: int, backward: bool, acc_bits: int = 32, vec: int = 4) -> dict:
    """The tile of a launch, ``dict(J, K, LANES, BD, num_warps)``, for chunks of ``block_l`` steps (a power of two)
    and ``block_d`` channels per forward program. Each thread holds ``T = J K`` consecutive steps (``FWD_STEPS`` or
    ``BWD_STEPS``, halved for float64, at most ``block_l``), ``LANES = block_l / T`` lanes span the chunk, the warp's
    other lanes and the warps hold channels; ``K`` steps per vector load (``vec``; 1 where time is strided). The
    backward keeps the forward's warps: its threads hold fewer steps, so its programs hold fewer channels."""
    half = 2 if acc_bits == 64 else 1
    t_fwd = max(min(FWD_STEPS // half, block_l), 1)
    T = max(min((BWD_STEPS if backward else FWD_STEPS) // half, block_l), 1)
    lanes = block_l // T
    if lanes > 32 or lanes * T != block_l:
        raise ValueError(
            f"selective scan: chunks of {block_l} steps (a power of two, at most {32 * T}) at {T} steps per thread"
        )
    bd = max(block_d * T // t_fwd, 1)
    K = min(vec, T)
    return dict(J=T // K, K=K, LANES=lanes, BD=bd, num_warps=max(bd * lanes // 32, 1))


def _coef_layout(W: Tensor, dim: int) -> tuple[int, ...]:
    """(channels per group, strides of batch, group, state) of a ``(batch, G, n, L)`` coefficient (time contiguous);
    unused placeholders for a fixed ``(d, n)`` one."""
    if W.dim() != 4:
        return (1, 0, 0, 0)
    _, G, n, L = W.shape
    return (dim // G, G * n * L, n * L, L)


def _standard_layout(u, A, B, C) -> tuple[tuple[int, ...], int]:
    """The kernels' layout arguments for :func:`neurodyn.ops.selective_scan`'s contiguous tensors and the time stride
    of the u-like tensors (see the kernels' signature: u-like strides of batch and channel and the head layout's
    channel stride; delta's strides; dt_div; A's sets and strides; D's set stride; B's and C's group size and
    strides; time is contiguous in delta, B and C)."""
    batch, dim, L = u.shape
    n = A.shape[1]
    return (dim, L, n, dim * L, L, L, dim * L, L, 1, 1, 0, n, 1, 0, *_coef_layout(B, dim), *_coef_layout(C, dim)), 1


def _head_layout(u, dtt, A, Bt) -> tuple[tuple[int, ...], int]:
    """The layout arguments for :func:`neurodyn.ops.head_scan`'s tensors, batch and sets folded into the programs'
    batch index: ``u (batch, S, L, H P)`` read in place (channels ``H P``, time stride ``H P``); the per-head
    ``dtt (batch S, H, L)`` (dt transposed, ``dt_div = P``); ``A (S, H)`` one decay per head, the same for every
    state; ``D (S, H P)``; ``Bt, Ct (batch S, G, N, L)`` (transposed), channel ``i`` in group ``i // (P H / G)``."""
    batch, S, L, HP = u.shape
    H = dtt.shape[1]
    P = HP // H
    return (
        HP,
        L,
        Bt.shape[2],
        L * HP,
        1,
        1,
        H * L,
        L,
        P,
        S,
        H,
        1,
        0,
        HP,
        *_coef_layout(Bt, HP),
        *_coef_layout(Bt, HP),
    ), HP


def _launch_args(su_t, block_l, block_d, acc, backward):
    """The kernels' tile constexprs and launch options: u-like tensors loaded ``K`` steps per vector where their
    time stride ``su_t`` is 1, one step per load otherwise (``KU = 1``: the head layout); B/C and delta always by
    vectors."""
    g = geometry(block_l, block_d, backward, 64 if acc == tl.float64 else 32, 4)
    ku = g["K"] if su_t == 1 else 1
    T = g["J"] * g["K"]
    kw = dict(
        ACC=acc,
        BD=g["BD"],
        LANES=g["LANES"],
        JU=T // ku,
        KU=ku,
        JC=g["J"],
        KC=g["K"],
        SU_T=su_t,
        num_warps=g["num_warps"],
    )
    if backward and MAXNREG_BWD and not _INTERPRETED and target_arch() >= 90:
        kw["maxnreg"] = MAXNREG_BWD
    return kw


def _launch_fwd(
    layout,
    su_t,
    batch,
    u,
    delta,
    A,
    B,
    C,
    D,
    z,
    bias,
    h0,
    softplus,
    reverse,
    save_ckpt,
    block_l,
    block_d,
    zoh,
    var_b,
    var_c,
    head=False,
):
    dim, L, n = layout[:3]
    acc = _acc(u, delta, A, B, C, D, z, bias, h0)
    cdt = torch.float64 if acc == tl.float64 else torch.float32
    nchunks = triton.cdiv(L, block_l)
    out = torch.empty_like(u)
    last = u.new_empty(batch, dim, n, dtype=cdt)
    ckpt = u.new_empty(batch, dim, nchunks, n, dtype=cdt) if save_ckpt else u.new_empty(0, dtype=cdt)
    ring = u.new_empty(batch, dim, 2, n, dtype=cdt)
    kw = _launch_args(su_t, block_l, block_d, acc, False)
    _selective_scan_fwd_kernel[(batch, triton.cdiv(dim, kw["BD"]))](
        u,
        delta,
        A,
        B,
        C,
        u if D is None else D,
        u if z is None else z,
        u if bias is None else bias,
        u if h0 is None else h0,
        out,
        last,
        ckpt if save_ckpt else last,
        ring,
        dim,
        L,
        n,
        nchunks,
        *layout[3:],
        B_VAR=var_b,
        C_VAR=var_c,
        HAS_D=D is not None,
        HAS_Z=z is not None,
        HAS_BIAS=bias is not None,
        HAS_H0=h0 is not None,
        SOFTPLUS=softplus,
        REVERSE=reverse,
        SAVE_CKPT=save_ckpt,
        ZOH=zoh,
        HEAD=head,
        **kw,
    )
    return out, last, ckpt


def _launch_bwd(
    layout,
    su_t,
    batch,
    u,
    delta,
    A,
    B,
    C,
    D,
    z,
    bias,
    h0,
    ckpt,
    gout,
    glast,
    softplus,
    reverse,
    block_l,
    block_d,
    zoh,
    var_b,
    var_c,
    head=False,
    per_head=False,
):
    dim, L, n = layout[:3]
    acc = _acc(u, delta, A, B, C, D, z, bias, h0)
    cdt = torch.float64 if acc == tl.float64 else torch.float32
    kw = _launch_args(su_t, block_l, block_d, acc, True)
    lanes = kw["LANES"]
    new = lambda *shape: u.new_empty(*shape, dtype=cdt)  # noqa: E731
    zeros = lambda *shape: u.new_zeros(*shape, dtype=cdt)  # noqa: E731
    # gdelta: one per channel, in u's layout (delta's dtype; for heads a partial sum over a head's channels: cdt)
    gu, gdelta = torch.empty_like(u), u.new_empty(u.shape, dtype=cdt if per_head else delta.dtype)
    gz = torch.empty_like(z) if z is not None else new(0)  # (empty outputs: distinct tensors, no output aliases)
    gh0 = new(batch, dim, n) if h0 is not None else new(0)
    gA = zeros(batch, dim, lanes, n)
    coef = lambda W, var: zeros(*W.shape) if var else zeros(batch, dim, lanes, n)  # noqa: E731
    gB, gC = coef(B, var_b), coef(C, var_c)
    gD, gbias = new(batch, dim, lanes), new(batch, dim, lanes)
    ring = new(batch, dim, 2, n)
    _selective_scan_bwd_kernel[(batch, triton.cdiv(dim, kw["BD"]))](
        u,
        delta,
        A,
        B,
        C,
        u if D is None else D,
        u if z is None else z,
        u if bias is None else bias,
        ckpt,
        gout,
        gout if glast is None else glast,
        ring,
        gu,
        gdelta,
        gu if z is None else gz,
        gA if h0 is None else gh0,
        gA,
        gB,
        gC,
        gD,
        gbias,
        dim,
        L,
        n,
        ckpt.shape[2],
        *layout[3:],
        B_VAR=var_b,
        C_VAR=var_c,
        HAS_D=D is not None,
        HAS_Z=z is not None,
        HAS_BIAS=bias is not None,
        HAS_H0=h0 is not None,
        HAS_GLAST=glast is not None,
        SOFTPLUS=softplus,
        REVERSE=reverse,
        ZOH=zoh,
        HEAD=head,
        **kw,
    )
    gA = gA.sum(2)
    gB = gB if var_b else gB.sum(2)
    gC = gC if var_c else gC.sum(2)
    return gu, gdelta, gz, gh0, gA, gB, gC, gD.sum(2), gbias.sum(2)


def fwd(u, delta, A, B, C, D, z, bias, h0, softplus, reverse, save_ckpt, block_l, block_d, zoh):
    """The selective scan: ``(out (batch, d, L) in u's dtype, last (batch, d, n), ckpt (batch, d, nchunks, n) or
    empty)``; last and ckpt in the accumulation dtype."""
    layout, su_t = _standard_layout(u, A, B, C)
    return _launch_fwd(
        layout,
        su_t,
        u.shape[0],
        u,
        delta,
        A,
        B,
        C,
        D,
        z,
        bias,
        h0,
        softplus,
        reverse,
        save_ckpt,
        block_l,
        block_d,
        zoh,
        B.dim() == 4,
        C.dim() == 4,
    )


def bwd(u, delta, A, B, C, D, z, bias, h0, ckpt, gout, glast, softplus, reverse, block_l, block_d, zoh):
    """Returns ``(gu, gdelta, gz, gh0, gA, gB, gC, gD, gbias)``: gu, gdelta, gz like u/delta/z; gh0 (batch, d, n);
    gA (batch, d, n), fixed gB/gC (batch, d, n), gD and gbias (batch, d) per batch element (to be summed over it);
    input-dependent gB/gC like B/C; everything but gu/gdelta/gz in the accumulation dtype, empty when absent."""
    layout, su_t = _standard_layout(u, A, B, C)
    return _launch_bwd(
        layout,
        su_t,
        u.shape[0],
        u,
        delta,
        A,
        B,
        C,
        D,
        z,
        bias,
        h0,
        ckpt,
        gout,
        glast,
        softplus,
        reverse,
        block_l,
        block_d,
        zoh,
        B.dim() == 4,
        C.dim() == 4,
    )


def _head_major(dt, B, C):
    """dt, B, C with time last (``(batch S, H, L)``, ``(batch S, G, N, L)``): small copies (no ``H P`` factor) that
    make their loads vector loads; u stays in place."""
    batch, S, L, G, N = B.shape
    t = lambda W: W.permute(0, 1, 3, 4, 2).contiguous().view(batch * S, G, N, L)  # noqa: E731
    return dt.permute(0, 1, 3, 2).contiguous().view(batch * S, dt.shape[3], L), t(B), t(C)


def head_fwd(u, dt, A, B, C, D, save_ckpt, block_l, block_d):
    """The multi-head scan on :func:`neurodyn.ops.head_scan`'s tensors (:func:`_head_layout`): ``(y like u, ckpt
    (batch S, H P, nchunks, N) or empty)``."""
    batch, S = u.shape[:2]
    dtt, Bt, Ct = _head_major(dt, B, C)
    layout, su_t = _head_layout(u, dtt, A, Bt)
    out, _, ckpt = _launch_fwd(
        layout,
        su_t,
        batch * S,
        u,
        dtt,
        A,
        Bt,
        Ct,
        D,
        None,
        None,
        None,
        False,
        False,
        save_ckpt,
        block_l,
        block_d,
        False,
        True,
        True,
        head=True,
    )
    return out, ckpt


def head_bwd(u, dt, A, B, C, D, ckpt, gy, block_l, block_d):
    """``(gu like u, gdt per channel of u's shape (to be summed over each head's P channels), gA (batch S, H P, N),
    gB, gC like B, C, gD (batch S, H P))``: all but gu in the accumulation dtype, gA and gD per batch element and
    set."""
    batch, S, L, G, N = B.shape
    dtt, Bt, Ct = _head_major(dt, B, C)
    layout, su_t = _head_layout(u, dtt, A, Bt)
    gu, gdt, _, _, gA, gB, gC, gD, _ = _launch_bwd(
        layout,
        su_t,
        batch * S,
        u,
        dtt,
        A,
        Bt,
        Ct,
        D,
        None,
        None,
        None,
        ckpt,
        gy,
        None,
        False,
        False,
        block_l,
        block_d,
        False,
        True,
        True,
        head=True,
        per_head=True,
    )
    back = lambda W: W.view(batch, S, G, N, L).permute(0, 1, 4, 2, 3).contiguous()  # noqa: E731
    return gu, gdt, gA, back(gB), back(gC), gD
