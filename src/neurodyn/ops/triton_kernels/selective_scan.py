"""Triton kernels of the selective scan (forward, and backward by chunked recomputation), built like mamba-ssm's CUDA
kernel. Loaded by :func:`neurodyn.ops.triton_kernels.load` only; the operators are in :mod:`neurodyn.ops.triton_ops`.

The recurrence, in scan order ``s = 0 .. L-1`` (time ``t = s``, or ``t = L-1-s`` when ``REVERSE``)::

    dt_s = softplus(delta_t + bias)   (or delta_t + bias)        a_s = exp(dt_s A),  x_s = w_s B_t u_t   (b, d, n)
    h_s  = a_s h_{s-1} + x_s            (h_{-1} = h0 or 0)
    y_t  = sum_n C_t h_s + D u_t        out_t = y_t silu(z_t)    (or y_t)

with the input factor ``w_s = dt_s`` (Mamba's Euler input) or, with ``ZOH``, the Kirchhoff cell's exact zero-order
hold ``w_s = (1 - a_s) / lambda = dt_s phi(dt_s lambda)``, ``lambda = -A > 0`` (:mod:`neurodyn.ops.knc_scan`;
``dw/ddt = a``, ``dw/dA = (w - dt a) / lambda = dt^2 psi``, :func:`_zoh`).

Layout (:func:`_standard_layout`): ``u, delta, z, out: (batch, d, L)``; ``A: (d, n)``; ``B, C``: ``(d, n)`` fixed
or ``(batch, G, n, L)`` (channel ``i`` in group ``i // (d / G)``); ``D, bias: (d,)``; ``h0, last: (batch, d, n)``;
all contiguous. The kernels address u-like tensors, delta, A, D and input-dependent B/C through strides, so that the
multi-head scan's time-major tensors are read in place (:func:`_head_layout`: batch and sets folded into the programs'
batch index, a channel reading its head's step and decay; ``HEAD``: one decay per channel for all its states, so the
decays and their chunk totals are computed once per step instead of once per state). Inputs may be
float16/bfloat16/float32/float64; each load is converted to the accumulation dtype ``ACC`` (float32, or float64
when an input is float64).

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
a chunk's loop cannot be indexed in registers); with ``SAVE_CKPT`` it is also stored as the checkpoint,
``ckpt: (batch, d, nchunks, n)``.

Backward (the adjoint ``lam_s = dLoss/dh_s``)::

    lam_s   = C_t gy_t + a_{s+1} lam_{s+1},          lam_{L-1} = C gy + glast,   gy = gout silu(z) (or gout)
    gx_s = lam_s:  gu_t = sum_n lam_s w_s B_t + D gy_t,   gB_t = sum_{d in group} lam_s w_s u_t,
    gdt_s   = sum_n lam_s (A a_s h_{s-1} + dw/ddt B_t u_t),  gC_t = sum gy_t h_s,
    gA      = sum_{b,s} lam_s (dt_s a_s h_{s-1} + dw/dA B_t u_t),
    gz = gout y dsilu(z),  gdelta = gdt sigmoid(delta + bias) (softplus) or gdt,  gh0 = a_0 lam_0

The programs walk the chunks from the last to the first; per state each recomputes its chunk's states from the
checkpoint (as the forward), then runs the adjoint the same way in reverse (the threads' totals scanned from the
last lane, the carry ``a_first lam_first`` passed to the previous chunk through the ring buffer). The backward holds
fewer steps per thread (``T = 8``) than the forward so that it stays near 160 registers. Per-channel partial sums
over time (gA, fixed gB/gC, gD, gbias) are kept per lane and summed by the launcher; input-dependent gB/gC are added
per channel with vector atomics into an ``ACC`` buffer.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from neurodyn.ops.triton_kernels import shared

common = shared()  # rsum (this build's)

Tensor = torch.Tensor

# which build this is: the loader executes this file with TRITON_INTERPRET=1 for the interpreter (CPU tensors)
_INTERPRETED = os.environ.get("TRITON_INTERPRET", "0").strip() == "1"

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
# ZOH: below x = dt lambda = 1/4 the factors phi(x) = (1 - e^-x)/x and psi(x) = (phi - e^-x)/x come from their
# Taylor series (5 terms: relative error < 2e-6 at 1/4, far less below), above from the closed forms, whose
# cancellation (the exponential's error over x) is below that there. In log2 units y = -x log2(e), the series'
# coefficients are ln2^k / (k+1)! and (k+1) ln2^k / (k+2)!.
ZOH_SWITCH = -0.25 * LOG2E
PHI0, PHI1, PHI2, PHI3, PHI4 = (1.0, LN2 / 2, LN2 ** 2 / 6, LN2 ** 3 / 24, LN2 ** 4 / 120)
PSI0, PSI1, PSI2, PSI3, PSI4 = (0.5, 2 * LN2 / 6, 3 * LN2 ** 2 / 24, 4 * LN2 ** 3 / 120, 5 * LN2 ** 4 / 720)


# ---------------------------------------------------------------------------------------------------------------
# fast math: the hardware approximations for float32 in the compiled build (rcp.approx, lg2.approx; tl.exp2 is
# already ex2.approx.ftz), the exact operations for float64 and in the interpreter (which runs no inline assembly)

if _INTERPRETED:
    @triton.jit
    def _rcp(x):
        return 1.0 / x

    @triton.jit
    def _lg2(x):
        return tl.log2(x)
else:
    @triton.jit
    def _rcp(x):
        if x.dtype == tl.float32:
            return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                             is_pure=True, pack=1)
        else:
            return 1.0 / x

    @triton.jit
    def _lg2(x):
        if x.dtype == tl.float32:
            return tl.inline_asm_elementwise("lg2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                             is_pure=True, pack=1)
        else:
            return tl.log2(x)


@triton.jit
def _softplus(v):
    """``(softplus(v), e, 1 + e)`` with ``e = exp(v)``: ``log1p(e)`` by Kahan's ``log(w) e / (w - 1)``, ``w = 1 + e``
    (accurate where ``e`` is tiny), ``v`` itself above 20 as torch."""
    e = tl.exp2(tl.minimum(v, 20.0) * LOG2E)
    w = 1.0 + e
    one = w == 1.0
    lp = _lg2(w) * LN2 * e * _rcp(tl.where(one, 1.0, w - 1.0))
    return tl.where(v > 20.0, v, tl.where(one, e, lp)), e, w


@triton.jit
def _silu_parts(z):
    """``(z sigmoid(z), sigmoid(z))``."""
    sg = _rcp(1.0 + tl.exp2(-z * LOG2E))
    return z * sg, sg


@triton.jit
def _zoh(dt, a, y, inv_lam, GRAD: tl.constexpr):
    """The ZOH input factor ``w = dt phi(x)`` and, with ``GRAD``, ``dw/dA = dt^2 psi(x)`` (else 0) at
    ``x = dt lambda``, from ``a = exp(-x)``, ``y = -x log2(e)`` and ``inv_lam = 1 / lambda``: the series below the
    switch, the closed forms ``(1 - a) / lambda`` and ``(w - dt a) / lambda`` above (module constants)."""
    small = y > ZOH_SWITCH
    phi = (((PHI4 * y + PHI3) * y + PHI2) * y + PHI1) * y + PHI0
    w = tl.where(small, dt * phi, inv_lam - a * inv_lam)
    wA = w * 0.0
    if GRAD:
        psi = (((PSI4 * y + PSI3) * y + PSI2) * y + PSI1) * y + PSI0
        wA = tl.where(small, dt * dt * psi, (w - dt * a) * inv_lam)
    return w, wA


# ---------------------------------------------------------------------------------------------------------------
# the chunk tile: (BD, LANES, T), T consecutive steps in each thread

@triton.jit
def _tile(x, BD: tl.constexpr, LANES: tl.constexpr, T: tl.constexpr):
    """A loaded ``(J, BD, LANES, K)`` tile as the ``(BD, LANES, T)`` chunk tile (no data movement)."""
    return tl.reshape(tl.permute(x, (1, 2, 0, 3)), (BD, LANES, T))


@triton.jit
def _untile(x, BD: tl.constexpr, LANES: tl.constexpr, J: tl.constexpr, K: tl.constexpr):
    return tl.permute(tl.reshape(x, (BD, LANES, J, K)), (2, 0, 1, 3))


@triton.jit
def _load(ptr, off4, mask4, ACC: tl.constexpr, BD: tl.constexpr, LANES: tl.constexpr, T: tl.constexpr):
    return _tile(tl.load(ptr + off4, mask=mask4, other=0.0).to(ACC), BD, LANES, T)


@triton.jit
def _store(ptr, off4, val, mask4, BD: tl.constexpr, LANES: tl.constexpr, J: tl.constexpr, K: tl.constexpr):
    tl.store(ptr + off4, _untile(val, BD, LANES, J, K).to(ptr.dtype.element_ty), mask=mask4)


@triton.jit
def _pick(x, q: tl.constexpr, T: tl.constexpr, REVERSE: tl.constexpr):
    """Step ``q`` (scan order) of every thread, ``(BD, LANES)``: a register, once the compiler folds the select (and
    the sum of -0.0 with it)."""
    if REVERSE:
        i = T - 1 - q
    else:
        i = q
    return common.rsum(tl.where(tl.arange(0, T)[None, None, :] == i, x, -0.0), 2)


@triton.jit
def _put(acc, v, q: tl.constexpr, T: tl.constexpr, REVERSE: tl.constexpr):
    """``acc`` with step ``q`` (scan order) of every thread replaced by ``v (BD, LANES)``."""
    if REVERSE:
        i = T - 1 - q
    else:
        i = q
    return tl.where(tl.arange(0, T)[None, None, :] == i, v[:, :, None], acc)


@triton.jit
def _from_lane(x, src):
    """``x[:, src]`` per channel row (a warp shuffle)."""
    return tl.gather(x, tl.broadcast_to(src, x.shape), 1)


@triton.jit
def _lane_prev(x, lane, off: tl.constexpr, LANES: tl.constexpr, REVERSE: tl.constexpr):
    """The value ``off`` lanes earlier in scan order (clamped at the chunk's first lane)."""
    if REVERSE:
        src = tl.minimum(lane + off, LANES - 1)
    else:
        src = tl.maximum(lane - off, 0)
    return _from_lane(x, src[None, :])


@triton.jit
def _has_prev(lane, off: tl.constexpr, LANES: tl.constexpr, REVERSE: tl.constexpr):
    if REVERSE:
        return (lane < LANES - off)[None, :]
    else:
        return (lane >= off)[None, :]


@triton.jit
def _first_lane(lane, LANES: tl.constexpr, REVERSE: tl.constexpr):
    if REVERSE:
        return (lane == LANES - 1)[None, :]
    else:
        return (lane == 0)[None, :]


@triton.jit
def _lane_scan(TA, TX, lane, LANES: tl.constexpr, REVERSE: tl.constexpr):
    """Inclusive scan of the threads' ``(decay, input)`` totals across the lanes in scan order (Kogge-Stone):
    ``TX`` becomes the state at the end of each thread's steps."""
    off: tl.constexpr = 1
    for _ in tl.static_range(LANES.bit_length() - 1):
        pX = _lane_prev(TX, lane, off, LANES, REVERSE)
        m = _has_prev(lane, off, LANES, REVERSE)
        if off * 2 < LANES:  # (the decays' products are not needed after the last level)
            pA = _lane_prev(TA, lane, off, LANES, REVERSE)
            TX = tl.where(m, TA * pX + TX, TX)
            TA = tl.where(m, TA * pA, TA)
        else:
            TX = tl.where(m, TA * pX + TX, TX)
        off = off * 2
    return TX


@triton.jit
def _chunk_states(a, x, TA, h_in, lane, T: tl.constexpr, LANES: tl.constexpr, REVERSE: tl.constexpr,
                  NEED_AH: tl.constexpr):
    """The states of one chunk and state: ``(h, ah, exit)`` with ``h (BD, LANES, T)``, ``ah = a h_prev`` (with
    ``NEED_AH``, else zeros) and the state after the chunk ``(BD, LANES)`` (the same in every lane), from the decays
    ``a``, inputs ``x``, each thread's total decay ``TA (BD, LANES)`` and the state entering the chunk
    ``h_in (BD,)``."""
    TX = _pick(x, 0, T, REVERSE)
    for q in tl.static_range(1, T):
        TX = _pick(a, q, T, REVERSE) * TX + _pick(x, q, T, REVERSE)
    first = _first_lane(lane, LANES, REVERSE)
    TX = tl.where(first, TA * h_in[:, None] + TX, TX)
    TX = _lane_scan(TA, TX, lane, LANES, REVERSE)
    h = tl.where(first, h_in[:, None], _lane_prev(TX, lane, 1, LANES, REVERSE))
    if REVERSE:
        last_lane = 0
    else:
        last_lane = LANES - 1
    exit = _from_lane(TX, tl.full((1, LANES), last_lane, tl.int32))
    hs = a * 0.0
    ahs = a * 0.0
    for q in tl.static_range(T):
        if NEED_AH:
            ah = _pick(a, q, T, REVERSE) * h
            h = ah + _pick(x, q, T, REVERSE)
            ahs = _put(ahs, ah, q, T, REVERSE)
        else:
            h = _pick(a, q, T, REVERSE) * h + _pick(x, q, T, REVERSE)
        hs = _put(hs, h, q, T, REVERSE)
    return hs, ahs, exit


@triton.jit
def _chunk_adjoint(a, g, TB, a_next, mu, lane, T: tl.constexpr, LANES: tl.constexpr, REVERSE: tl.constexpr):
    """The adjoint of one chunk and state, ``lam_s = g_s + a_{s+1} lam_{s+1}`` in reverse scan order: ``(lam, carry)``
    with ``lam (BD, LANES, T)`` and the carry to the previous chunk ``a_first lam_first (BD, LANES)``. ``TB`` is each
    thread's product of ``a_{s+1}`` over its steps, ``a_next`` the decay of the next thread's first step (1 for the
    chunk's last lane, whose successor term is ``mu = a_{s+1} lam_{s+1}`` from the next chunk)."""
    RX = _pick(g, T - 1, T, REVERSE)
    for qr in tl.static_range(1, T):
        q: tl.constexpr = T - 1 - qr
        RX = _pick(a, q + 1, T, REVERSE) * RX + _pick(g, q, T, REVERSE)
    last = _first_lane(lane, LANES, not REVERSE)
    RX = tl.where(last, TB * mu[:, None] + RX, RX)
    RX = _lane_scan(TB, RX, lane, LANES, not REVERSE)
    lam = tl.where(last, mu[:, None], a_next * _lane_prev(RX, lane, 1, LANES, not REVERSE))
    lams = a * 0.0
    for qr in tl.static_range(T):
        q: tl.constexpr = T - 1 - qr
        if qr == 0:
            lam = lam + _pick(g, q, T, REVERSE)
        else:
            lam = _pick(a, q + 1, T, REVERSE) * lam + _pick(g, q, T, REVERSE)
        lams = _put(lams, lam, q, T, REVERSE)
    if REVERSE:
        first_lane = LANES - 1
    else:
        first_lane = 0
    carry = _from_lane(_pick(a, 0, T, REVERSE) * lam, tl.full((1, LANES), first_lane, tl.int32))
    return lams, carry


# ---------------------------------------------------------------------------------------------------------------
# addressing

@triton.jit
def _geometry(dim, J: tl.constexpr, BD: tl.constexpr, LANES: tl.constexpr, K: tl.constexpr):
    """``(b, offs_d, mask_d, lane, p4)``: the batch index (64-bit), the program's channels, the lane index along the
    chunk and the in-chunk position ``p4 (J, 1, LANES, K)`` of every element of the loaded tile."""
    b = tl.program_id(0).to(tl.int64)
    offs_d = tl.program_id(1) * BD + tl.arange(0, BD)
    lane = tl.arange(0, LANES)
    T: tl.constexpr = J * K
    p4 = (tl.arange(0, LANES)[None, None, :, None] * T + tl.arange(0, J)[:, None, None, None] * K
          + tl.arange(0, K)[None, None, None, :])
    return b, offs_d, offs_d < dim, lane, p4


@triton.jit
def _times(c, L, p4, BL: tl.constexpr, REVERSE: tl.constexpr):
    """The times of chunk ``c`` (scan order) and their validity; in memory order either way, so that loads stay
    vector loads (a reverse chunk is scanned from its last position)."""
    if REVERSE:
        t4 = L - (c + 1) * BL + p4
    else:
        t4 = c * BL + p4
    return t4, (t4 >= 0) & (t4 < L)


@triton.jit
def _coef(ptr, fixed_ptr, b, offs_d, mask_d, nn, n, t4, mask4, gsize, s_b, s_g, s_n, s_t, ACC: tl.constexpr,
          VAR: tl.constexpr, BD: tl.constexpr, LANES: tl.constexpr, T: tl.constexpr):
    """B or C of state ``nn``: the ``(BD, LANES, T)`` tile of input-dependent values (channel ``i`` in group
    ``i // gsize``) or the fixed ``(BD,)`` column, broadcast."""
    if VAR:
        row = b * s_b + (offs_d // gsize).to(tl.int64) * s_g + nn * s_n
        return _load(ptr, row[None, :, None, None] + t4 * s_t, mask4, ACC, BD, LANES, T)
    else:
        return tl.load(fixed_ptr + offs_d * n + nn, mask=mask_d, other=0.0).to(ACC)[:, None, None]


@triton.jit
def _coef_offsets(b, offs_d, nn, t4, gsize, s_b, s_g, s_n, s_t):
    row = b * s_b + (offs_d // gsize).to(tl.int64) * s_g + nn * s_n
    return row[None, :, None, None] + t4 * s_t


@triton.jit
def _decay(A_ptr, b, offs_d, mask_d, nn, dt_div, sets, sa_s, sa_d, sa_n, ACC: tl.constexpr):
    """``A`` of state ``nn`` per channel ``(BD,)`` (-1 outside the channels, so that 1 / A stays finite)."""
    off = (b % sets) * sa_s + (offs_d // dt_div) * sa_d + nn * sa_n
    return tl.load(A_ptr + off, mask=mask_d, other=-1.0).to(ACC)


@triton.jit
def _step(delta_ptr, off4, mask4, bias, ACC: tl.constexpr, HAS_BIAS: tl.constexpr, SOFTPLUS: tl.constexpr,
          BD: tl.constexpr, LANES: tl.constexpr, T: tl.constexpr):
    """``(pre-activation, dt, e, 1 + e)`` on the tile (``e = exp(pre)`` with ``SOFTPLUS``); dt is 0 outside the
    sequence (so that the decay there is 1 and the input 0)."""
    pre = _load(delta_ptr, off4, mask4, ACC, BD, LANES, T)
    if HAS_BIAS:
        pre = pre + bias[:, None, None]
    dt = pre
    e = pre
    w = pre
    if SOFTPLUS:
        dt, e, w = _softplus(pre)
    m3 = _tile(mask4, BD, LANES, T)
    return pre, tl.where(m3, dt, 0.0), e, w, m3


@triton.jit
def _rows(b, offs_d, su_b, su_d, hsu_d, sd_b, sd_d, dt_div, HEAD: tl.constexpr):
    """Offsets of the program's channels in u-like tensors and in delta (``(1, BD, 1, 1)``). In the head layout the
    channels are contiguous in memory: their stride is ``hsu_d``, an argument Triton does not specialise, so that it
    keeps the tile's layout (time in-thread) instead of vectorising across channels."""
    if HEAD:
        urow = b * su_b + offs_d.to(tl.int64) * hsu_d
    else:
        urow = b * su_b + offs_d.to(tl.int64) * su_d
    drow = b * sd_b + (offs_d // dt_div).to(tl.int64) * sd_d
    return urow[None, :, None, None], drow[None, :, None, None]


# ---------------------------------------------------------------------------------------------------------------
# forward

@triton.jit(do_not_specialize=["hsu_d"])
def _selective_scan_fwd_kernel(
    u_ptr, delta_ptr, A_ptr, B_ptr, C_ptr, D_ptr, z_ptr, bias_ptr, h0_ptr, out_ptr, last_ptr, ckpt_ptr, ring_ptr,
    dim, L, n, nchunks, su_b, su_d, su_t, hsu_d, sd_b, sd_d, sd_t, dt_div, sets, sa_s, sa_d, sa_n, sD_s,
    gb_size, sb_b, sb_g, sb_n, sb_t, gc_size, sc_b, sc_g, sc_n, sc_t,
    ACC: tl.constexpr, BD: tl.constexpr, LANES: tl.constexpr, J: tl.constexpr, K: tl.constexpr,
    B_VAR: tl.constexpr, C_VAR: tl.constexpr, HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_H0: tl.constexpr, SOFTPLUS: tl.constexpr, REVERSE: tl.constexpr, SAVE_CKPT: tl.constexpr, ZOH: tl.constexpr,
    HEAD: tl.constexpr,
):
    T: tl.constexpr = J * K
    BL: tl.constexpr = LANES * T
    b, offs_d, mask_d, lane, p4 = _geometry(dim, J, BD, LANES, K)
    urow, drow = _rows(b, offs_d, su_b, su_d, hsu_d, sd_b, sd_d, dt_div, HEAD)
    md4 = mask_d[None, :, None, None]
    bias = tl.full((BD,), 0.0, ACC)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_d, mask=mask_d, other=0.0).to(ACC)
    Dv = tl.full((BD,), 0.0, ACC)
    if HAS_D:
        Dv = tl.load(D_ptr + (b % sets) * sD_s + offs_d, mask=mask_d, other=0.0).to(ACC)
    bdn = (b * dim + offs_d) * n            # rows of (batch, d, n) tensors
    ring = (b * dim + offs_d) * (2 * n)     # (batch, d, 2, n): the state entering the chunk, ping-pong
    ck = (b * dim + offs_d) * (nchunks * n)
    for nn in range(n):
        h = tl.full((BD,), 0.0, ACC)
        if HAS_H0:
            h = tl.load(h0_ptr + bdn + nn, mask=mask_d, other=0.0).to(ACC)
        tl.store(ring_ptr + ring + nn, h, mask=mask_d)
    A_h = _decay(A_ptr, b, offs_d, mask_d, 0, dt_div, sets, sa_s, sa_d, sa_n, ACC) * LOG2E
    for c in range(nchunks):
        tl.debug_barrier()  # (the ring was written by other threads)
        t4, mt4 = _times(c, L, p4, BL, REVERSE)
        m4 = md4 & mt4
        u = _load(u_ptr, urow + t4 * su_t, m4, ACC, BD, LANES, T)
        pre, dt, e, w1, m3 = _step(delta_ptr, drow + t4 * sd_t, m4, bias, ACC, HAS_BIAS, SOFTPLUS, BD, LANES, T)
        dtu = dt * u
        dts = common.rsum(dt, 2)
        y = Dv[:, None, None] * u
        if HEAD:  # one decay for all states: computed once per step
            a_h = tl.exp2(dt * A_h[:, None, None])
            TA_h = tl.exp2(dts * A_h[:, None])
        rd = ring + (c % 2) * n
        wr = ring + ((c + 1) % 2) * n
        for nn in range(n):
            h_in = tl.load(ring_ptr + rd + nn, mask=mask_d, other=0.0)
            if SAVE_CKPT:
                tl.store(ckpt_ptr + ck + c * n + nn, h_in, mask=mask_d)
            Bn = _coef(B_ptr, B_ptr, b, offs_d, mask_d, nn, n, t4, m4, gb_size, sb_b, sb_g, sb_n, sb_t, ACC, B_VAR,
                       BD, LANES, T)
            if HEAD:
                a = a_h
                TA = TA_h
                x = dtu * Bn
            else:
                A = _decay(A_ptr, b, offs_d, mask_d, nn, dt_div, sets, sa_s, sa_d, sa_n, ACC)
                A2 = A * LOG2E
                y2 = dt * A2[:, None, None]
                a = tl.exp2(y2)
                TA = tl.exp2(dts * A2[:, None])
                if ZOH:
                    w, _ = _zoh(dt, a, y2, -_rcp(A)[:, None, None], False)
                    x = w * (Bn * u)
                else:
                    x = dtu * Bn
            hs, _, exit = _chunk_states(a, x, TA, h_in, lane, T, LANES, REVERSE, False)
            tl.store(ring_ptr + wr[:, None] + nn + 0 * lane[None, :], exit, mask=mask_d[:, None] & (lane == 0)[None, :])
            Cn = _coef(C_ptr, C_ptr, b, offs_d, mask_d, nn, n, t4, m4, gc_size, sc_b, sc_g, sc_n, sc_t, ACC, C_VAR,
                       BD, LANES, T)
            y += Cn * hs
        if HAS_Z:
            zz = _load(z_ptr, urow + t4 * su_t, m4, ACC, BD, LANES, T)
            sz, _ = _silu_parts(zz)
            y = y * sz
        _store(out_ptr, urow + t4 * su_t, y, m4, BD, LANES, J, K)
    tl.debug_barrier()
    fin = ring + (nchunks % 2) * n
    for nn in range(n):
        tl.store(last_ptr + bdn + nn, tl.load(ring_ptr + fin + nn, mask=mask_d, other=0.0), mask=mask_d)


# ---------------------------------------------------------------------------------------------------------------
# backward

@triton.jit(do_not_specialize=["hsu_d"])
def _selective_scan_bwd_kernel(
    u_ptr, delta_ptr, A_ptr, B_ptr, C_ptr, D_ptr, z_ptr, bias_ptr, ckpt_ptr, gout_ptr, glast_ptr, ring_ptr,
    gu_ptr, gdelta_ptr, gz_ptr, gh0_ptr, gA_ptr, gB_ptr, gC_ptr, gD_ptr, gbias_ptr,
    dim, L, n, nchunks, su_b, su_d, su_t, hsu_d, sd_b, sd_d, sd_t, dt_div, sets, sa_s, sa_d, sa_n, sD_s,
    gb_size, sb_b, sb_g, sb_n, sb_t, gc_size, sc_b, sc_g, sc_n, sc_t,
    ACC: tl.constexpr, BD: tl.constexpr, LANES: tl.constexpr, J: tl.constexpr, K: tl.constexpr,
    B_VAR: tl.constexpr, C_VAR: tl.constexpr, HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_H0: tl.constexpr, HAS_GLAST: tl.constexpr, SOFTPLUS: tl.constexpr, REVERSE: tl.constexpr,
    ZOH: tl.constexpr, HEAD: tl.constexpr,
):
    T: tl.constexpr = J * K
    BL: tl.constexpr = LANES * T
    b, offs_d, mask_d, lane, p4 = _geometry(dim, J, BD, LANES, K)
    urow, drow = _rows(b, offs_d, su_b, su_d, hsu_d, sd_b, sd_d, dt_div, HEAD)
    md4 = mask_d[None, :, None, None]
    ml = mask_d[:, None] & (lane >= 0)[None, :]
    bias = tl.full((BD,), 0.0, ACC)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_d, mask=mask_d, other=0.0).to(ACC)
    Dv = tl.full((BD,), 0.0, ACC)
    if HAS_D:
        Dv = tl.load(D_ptr + (b % sets) * sD_s + offs_d, mask=mask_d, other=0.0).to(ACC)
    bdn = (b * dim + offs_d) * n
    ring = (b * dim + offs_d) * (2 * n)
    ck = (b * dim + offs_d) * (nchunks * n)
    # per-lane partial sums: (batch, d, LANES, n) for gA and fixed gB/gC, (batch, d, LANES) for gD and gbias
    part = ((b * dim + offs_d) * LANES)[:, None] * n + lane[None, :] * n
    for nn in range(n):
        mu = tl.full((BD,), 0.0, ACC)
        if HAS_GLAST:
            mu = tl.load(glast_ptr + bdn + nn, mask=mask_d, other=0.0).to(ACC)
        tl.store(ring_ptr + ring + nn, mu, mask=mask_d)
    gD = tl.full((BD, LANES), 0.0, ACC)
    gbias = tl.full((BD, LANES), 0.0, ACC)
    A_h = _decay(A_ptr, b, offs_d, mask_d, 0, dt_div, sets, sa_s, sa_d, sa_n, ACC)
    for i in range(nchunks):
        c = nchunks - 1 - i
        tl.debug_barrier()
        t4, mt4 = _times(c, L, p4, BL, REVERSE)
        m4 = md4 & mt4
        u = _load(u_ptr, urow + t4 * su_t, m4, ACC, BD, LANES, T)
        pre, dt, e, w1, m3 = _step(delta_ptr, drow + t4 * sd_t, m4, bias, ACC, HAS_BIAS, SOFTPLUS, BD, LANES, T)
        gy = _load(gout_ptr, urow + t4 * su_t, m4, ACC, BD, LANES, T)
        if HAS_Z:
            zz = _load(z_ptr, urow + t4 * su_t, m4, ACC, BD, LANES, T)
            sz, _ = _silu_parts(zz)
            gy = gy * sz
        dtu = dt * u
        dts = common.rsum(dt, 2)
        # dt of the next thread's first step (scan order; 0 past the chunk's last lane: its successor is the carry)
        dt_f = _pick(dt, 0, T, REVERSE)
        dt_n = tl.where(_first_lane(lane, LANES, not REVERSE), 0.0, _lane_prev(dt_f, lane, 1, LANES, not REVERSE))
        dts_b = dts - dt_f + dt_n
        acc_lb = u * 0.0    # sum_n lam w B  (Euler: sum_n lam B, times dt below)
        acc_gdt = u * 0.0   # sum_n lam (A a h_prev + dw/ddt B u)  (Euler: the first term; u acc_lb below)
        acc_y = Dv[:, None, None] * u
        gD += common.rsum(gy * u, 2)
        if HEAD:
            A2h = A_h * LOG2E
            a_h = tl.exp2(dt * A2h[:, None, None])
            TA_h = tl.exp2(dts * A2h[:, None])
            TB_h = tl.exp2(dts_b * A2h[:, None])
            an_h = tl.exp2(dt_n * A2h[:, None])
        rd = ring + (i % 2) * n
        wr = ring + ((i + 1) % 2) * n
        for nn in range(n):
            h_in = tl.load(ckpt_ptr + ck + c * n + nn, mask=mask_d, other=0.0).to(ACC)
            mu = tl.load(ring_ptr + rd + nn, mask=mask_d, other=0.0)
            Bn = _coef(B_ptr, B_ptr, b, offs_d, mask_d, nn, n, t4, m4, gb_size, sb_b, sb_g, sb_n, sb_t, ACC, B_VAR,
                       BD, LANES, T)
            if HEAD:
                A = A_h
                a = a_h
                TA = TA_h
                TB = TB_h
                a_next = an_h
            else:
                A = _decay(A_ptr, b, offs_d, mask_d, nn, dt_div, sets, sa_s, sa_d, sa_n, ACC)
                A2 = A * LOG2E
                y2 = dt * A2[:, None, None]
                a = tl.exp2(y2)
                TA = tl.exp2(dts * A2[:, None])
                TB = tl.exp2(dts_b * A2[:, None])
                a_next = tl.exp2(dt_n * A2[:, None])
            if ZOH:
                w, wA = _zoh(dt, a, y2, -_rcp(A)[:, None, None], True)
                bu = Bn * u
                x = w * bu
            else:
                x = dtu * Bn
            hs, ahs, _ = _chunk_states(a, x, TA, h_in, lane, T, LANES, REVERSE, True)
            Cn = _coef(C_ptr, C_ptr, b, offs_d, mask_d, nn, n, t4, m4, gc_size, sc_b, sc_g, sc_n, sc_t, ACC, C_VAR,
                       BD, LANES, T)
            lams, carry = _chunk_adjoint(a, Cn * gy, TB, a_next, mu, lane, T, LANES, REVERSE)
            tl.store(ring_ptr + wr[:, None] + nn + 0 * lane[None, :], carry,
                     mask=mask_d[:, None] & (lane == 0)[None, :])
            if ZOH:
                inner = A[:, None, None] * ahs + a * bu
                acc_gdt += lams * inner
                gA_n = common.rsum(lams * (dt * ahs + wA * bu), 2)
                lw = lams * w
                acc_lb += lw * Bn
                gBe = lw * u
            else:
                S = lams * ahs
                acc_gdt += A[:, None, None] * S
                gA_n = common.rsum(dt * S, 2)
                acc_lb += lams * Bn
                gBe = lams * dtu
            gCe = gy * hs
            if HAS_Z:
                acc_y += Cn * hs
            gp = gA_ptr + part + nn
            tl.store(gp, tl.load(gp, mask=ml, other=0.0) + gA_n, mask=ml)
            if B_VAR:
                off = _coef_offsets(b, offs_d, nn, t4, gb_size, sb_b, sb_g, sb_n, sb_t)
                tl.atomic_add(gB_ptr + off, _untile(gBe, BD, LANES, J, K), mask=m4, sem="relaxed")
            else:
                gp = gB_ptr + part + nn
                tl.store(gp, tl.load(gp, mask=ml, other=0.0) + common.rsum(gBe, 2), mask=ml)
            if C_VAR:
                off = _coef_offsets(b, offs_d, nn, t4, gc_size, sc_b, sc_g, sc_n, sc_t)
                tl.atomic_add(gC_ptr + off, _untile(gCe, BD, LANES, J, K), mask=m4, sem="relaxed")
            else:
                gp = gC_ptr + part + nn
                tl.store(gp, tl.load(gp, mask=ml, other=0.0) + common.rsum(gCe, 2), mask=ml)
        if ZOH:
            gu = acc_lb + Dv[:, None, None] * gy
            gdt = acc_gdt
        else:
            gu = dt * acc_lb + Dv[:, None, None] * gy
            gdt = acc_gdt + u * acc_lb
        if SOFTPLUS:
            gdt = gdt * e * _rcp(w1)
        gdt = tl.where(m3, gdt, 0.0)
        gbias += common.rsum(gdt, 2)
        _store(gu_ptr, urow + t4 * su_t, gu, m4, BD, LANES, J, K)
        _store(gdelta_ptr, urow + t4 * su_t, gdt, m4, BD, LANES, J, K)
        if HAS_Z:
            go = _load(gout_ptr, urow + t4 * su_t, m4, ACC, BD, LANES, T)
            zz = _load(z_ptr, urow + t4 * su_t, m4, ACC, BD, LANES, T)
            _, sg = _silu_parts(zz)
            _store(gz_ptr, urow + t4 * su_t, go * acc_y * sg * (1.0 + zz * (1.0 - sg)), m4, BD, LANES, J, K)
    tl.debug_barrier()
    if HAS_H0:  # gh0 = a_0 lam_0: the carry out of the first chunk
        fin = ring + (nchunks % 2) * n
        for nn in range(n):
            tl.store(gh0_ptr + bdn + nn, tl.load(ring_ptr + fin + nn, mask=mask_d, other=0.0), mask=mask_d)
    pl = ((b * dim + offs_d) * LANES)[:, None] + lane[None, :]
    tl.store(gD_ptr + pl, gD, mask=ml)
    tl.store(gbias_ptr + pl, gbias, mask=ml)


# ---------------------------------------------------------------------------------------------------------------
# launchers (arguments prepared by neurodyn.ops.triton_ops: contiguous, B/C 2-D or 4-D)

FWD_STEPS = 16   # steps per thread in the forward (float32)
BWD_STEPS = 8    # ... in the backward (its per-step state is larger: 8 keeps it near 160 registers)


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
        raise ValueError(f"selective scan: chunks of {block_l} steps (a power of two, at most {32 * T}) at {T} steps "
                         f"per thread")
    bd = max(block_d * T // t_fwd, 1)
    K = min(vec, T)
    return dict(J=T // K, K=K, LANES=lanes, BD=bd, num_warps=max(bd * lanes // 32, 1))


def _coef_layout(W: Tensor, dim: int) -> tuple[int, ...]:
    """(channels per group, strides of batch, group, state, step) of a ``(batch, G, n, L)`` coefficient; unused
    placeholders for a fixed ``(d, n)`` one."""
    if W.dim() != 4:
        return (1, 0, 0, 0, 0)
    _, G, n, L = W.shape
    return (dim // G, G * n * L, n * L, L, 1)


def _standard_layout(u, A, B, C) -> tuple[int, ...]:
    """The kernels' layout arguments for :func:`neurodyn.ops.selective_scan`'s contiguous tensors (see the kernels'
    signature: u-like strides of batch, channel, step and the head-layout channel stride; delta's strides; dt_div;
    A's sets and strides; D's set stride; B's and C's group size and strides)."""
    batch, dim, L = u.shape
    n = A.shape[1]
    return (dim, L, n, dim * L, L, 1, L, dim * L, L, 1, 1, 1, 0, n, 1, 0, *_coef_layout(B, dim),
            *_coef_layout(C, dim))


def _head_layout(u, dt, A, B) -> tuple[int, ...]:
    """The layout arguments for :func:`neurodyn.ops.head_scan`'s time-major tensors, batch and sets folded into the
    programs' batch index: ``u (batch, S, L, H P)`` -> channels ``H P`` with step stride ``H P``; ``dt (batch, S, L,
    H)`` read at the channel's head (``dt_div = P``); ``A (S, H)`` one decay per head, the same for every state; ``D
    (S, H P)``; ``B, C (batch, S, L, G, N)``, channel ``i`` in group ``i // (P H / G)``."""
    batch, S, L, HP = u.shape
    H = dt.shape[3]
    G, N = B.shape[3:]
    P = HP // H
    return (HP, L, N, L * HP, 1, HP, 1, L * H, 1, H, P, S, H, 1, 0, HP,
            P * (H // G), L * G * N, N, 1, G * N, P * (H // G), L * G * N, N, 1, G * N)


def _vec(layout, *tensors) -> int:
    """Steps per vector load: 4 where the u-like tensors' time stride is 1 (16 bytes of float32), else 1."""
    return 4 if layout[5] == 1 else 1


def _launch_fwd(layout, batch, u, delta, A, B, C, D, z, bias, h0, softplus, reverse, save_ckpt, block_l, block_d,
                zoh, var_b, var_c, head=False):
    dim, L, n = layout[:3]
    acc = _acc(u, delta, A, B, C, D, z, bias, h0)
    cdt = torch.float64 if acc == tl.float64 else torch.float32
    nchunks = triton.cdiv(L, block_l)
    out = torch.empty_like(u)
    last = u.new_empty(batch, dim, n, dtype=cdt)
    ckpt = u.new_empty(batch, dim, nchunks, n, dtype=cdt) if save_ckpt else u.new_empty(0, dtype=cdt)
    ring = u.new_empty(batch, dim, 2, n, dtype=cdt)
    g = geometry(block_l, block_d, False, 64 if acc == tl.float64 else 32, _vec(layout))
    _selective_scan_fwd_kernel[(batch, triton.cdiv(dim, g["BD"]))](
        u, delta, A, B, C, u if D is None else D, u if z is None else z, u if bias is None else bias,
        u if h0 is None else h0, out, last, ckpt if save_ckpt else last, ring, dim, L, n, nchunks, *layout[3:],
        ACC=acc, BD=g["BD"], LANES=g["LANES"], J=g["J"], K=g["K"], B_VAR=var_b, C_VAR=var_c, HAS_D=D is not None,
        HAS_Z=z is not None, HAS_BIAS=bias is not None, HAS_H0=h0 is not None, SOFTPLUS=softplus, REVERSE=reverse,
        SAVE_CKPT=save_ckpt, ZOH=zoh, HEAD=head, num_warps=g["num_warps"],
    )
    return out, last, ckpt


def _launch_bwd(layout, batch, u, delta, A, B, C, D, z, bias, h0, ckpt, gout, glast, softplus, reverse, block_l,
                block_d, zoh, var_b, var_c, head=False, per_head=False):
    dim, L, n = layout[:3]
    acc = _acc(u, delta, A, B, C, D, z, bias, h0)
    cdt = torch.float64 if acc == tl.float64 else torch.float32
    g = geometry(block_l, block_d, True, 64 if acc == tl.float64 else 32, _vec(layout))
    lanes = g["LANES"]
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
    _selective_scan_bwd_kernel[(batch, triton.cdiv(dim, g["BD"]))](
        u, delta, A, B, C, u if D is None else D, u if z is None else z, u if bias is None else bias,
        ckpt, gout, gout if glast is None else glast, ring,
        gu, gdelta, gu if z is None else gz, gA if h0 is None else gh0, gA, gB, gC, gD, gbias,
        dim, L, n, ckpt.shape[2], *layout[3:],
        ACC=acc, BD=g["BD"], LANES=lanes, J=g["J"], K=g["K"], B_VAR=var_b, C_VAR=var_c, HAS_D=D is not None,
        HAS_Z=z is not None, HAS_BIAS=bias is not None, HAS_H0=h0 is not None, HAS_GLAST=glast is not None,
        SOFTPLUS=softplus, REVERSE=reverse, ZOH=zoh, HEAD=head, num_warps=g["num_warps"],
    )
    gA = gA.sum(2)
    gB = gB if var_b else gB.sum(2)
    gC = gC if var_c else gC.sum(2)
    return gu, gdelta, gz, gh0, gA, gB, gC, gD.sum(2), gbias.sum(2)


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
                               False, save_ckpt, block_l, block_d, False, True, True, head=True)
    return out, ckpt


def head_bwd(u, dt, A, B, C, D, ckpt, gy, block_l, block_d):
    """``(gu like u, gdt per channel of u's shape (to be summed over each head's P channels), gA (batch S, H P, N),
    gB, gC like B, C, gD (batch S, H P))``: all but gu in the accumulation dtype, gA and gD per batch element and
    set."""
    batch, S = u.shape[:2]
    gu, gdt, _, _, gA, gB, gC, gD, _ = _launch_bwd(
        _head_layout(u, dt, A, B), batch * S, u, dt, A, B, C, D, None, None, None, ckpt, gy, None, False, False,
        block_l, block_d, False, True, True, head=True, per_head=True)
    return gu, gdt, gA, gB, gC, gD
