"""Helpers shared by the ops' Triton kernel modules (``ops/<op>/triton_kernels.py``), loaded like them once per build
(compiled / interpreted): a kernel module reaches them through :func:`neurodyn.ops.triton_loader.shared` while the
loader executes it. Never imported: it imports ``triton``."""

from __future__ import annotations

import os

import triton
import triton.language as tl


@triton.jit
def combine(a1, x1, a2, x2):
    """The first-order recurrence's associative combine: ``(a1, x1) . (a2, x2) = (a1 a2, a2 x1 + x2)``."""
    return a1 * a2, a2 * x1 + x2


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


# which build this is: the loader executes this file with TRITON_INTERPRET=1 for the interpreter (CPU tensors)
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0").strip() == "1"


def helper(fn):
    """``triton.jit`` for the compiled build; in the interpreted build the helpers stay plain Python functions, which
    the interpreted kernels call directly (each call of an interpreted ``@triton.jit`` function re-patches
    ``triton.language``, which costs more than the small helpers' work: the tests run several times faster)."""
    return fn if INTERPRETED else triton.jit(fn)


@helper
def rsum(x, axis: tl.constexpr):
    """The sum along ``axis`` (``tl.sum``'s reduction, which the interpreter runs with numpy)."""
    return tl.reduce(x, axis, tl.standard._sum_combine)


LOG2E_VALUE = 1.4426950408889634
LN2_VALUE = 0.6931471805599453
LOG2E = tl.constexpr(LOG2E_VALUE)
LN2 = tl.constexpr(LN2_VALUE)


# fast math: the hardware approximations for float32 in the compiled build (rcp.approx, lg2.approx; tl.exp2 is
# already ex2.approx.ftz), the exact operations for float64 and in the interpreter (which runs no inline assembly)

if INTERPRETED:

    def rcp(x):
        return 1.0 / x

    def lg2(x):
        return tl.log2(x)
else:

    @triton.jit
    def rcp(x):
        if x.dtype == tl.float32:
            return tl.inline_asm_elementwise(
                "rcp.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1
            )
        else:
            return 1.0 / x

    @triton.jit
    def lg2(x):
        if x.dtype == tl.float32:
            return tl.inline_asm_elementwise(
                "lg2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1
            )
        else:
            return tl.log2(x)


@helper
def softplus(v):
    """``(softplus(v), e, 1 + e)`` with ``e = exp(v)``: ``log1p(e)`` by Kahan's ``log(w) e / (w - 1)``, ``w = 1 + e``
    (accurate where ``e`` is tiny), ``v`` itself above 20 as torch."""
    e = tl.exp2(tl.minimum(v, 20.0) * LOG2E)
    w = 1.0 + e
    one = w == 1.0
    lp = lg2(w) * LN2 * e * rcp(tl.where(one, 1.0, w - 1.0))
    return tl.where(v > 20.0, v, tl.where(one, e, lp)), e, w


# the chunk tile: (BD, LANES, T), T consecutive steps in each thread


@helper
def tile(x, BD: tl.constexpr, LANES: tl.constexpr, T: tl.constexpr):
    """A loaded ``(J, BD, LANES, K)`` tile as the ``(BD, LANES, T)`` chunk tile (no data movement)."""
    return tl.reshape(tl.permute(x, (1, 2, 0, 3)), (BD, LANES, T))


@helper
def untile(x, BD: tl.constexpr, LANES: tl.constexpr, J: tl.constexpr, K: tl.constexpr):
    return tl.permute(tl.reshape(x, (BD, LANES, J, K)), (2, 0, 1, 3))


@helper
def pick(x, q: tl.constexpr, T: tl.constexpr, REVERSE: tl.constexpr):
    """Step ``q`` (scan order) of every thread, ``(BD, LANES)``: a register, once the compiler folds the select (and
    the sum of -0.0 with it)."""
    if REVERSE:
        i = T - 1 - q
    else:
        i = q
    return rsum(tl.where(tl.arange(0, T)[None, None, :] == i, x, -0.0), 2)


@helper
def put(acc, v, q: tl.constexpr, T: tl.constexpr, REVERSE: tl.constexpr):
    """``acc`` with step ``q`` (scan order) of every thread replaced by ``v (BD, LANES)``."""
    if REVERSE:
        i = T - 1 - q
    else:
        i = q
    return tl.where(tl.arange(0, T)[None, None, :] == i, v[:, :, None], acc)


@helper
def from_lane(x, src):
    """``x[:, src]`` per channel row (a warp shuffle)."""
    return tl.gather(x, tl.broadcast_to(src, x.shape), 1)


if INTERPRETED:
    # The same register picks and lane shuffles on the interpreter's numpy arrays: the kernels call them thousands of
    # times per chunk, and the interpreter's tensor operations cost ~0.3 ms each (the tests' time).
    import numpy as np
    from triton.runtime.interpreter import TensorHandle

    def wrap(arr, like):
        return tl.core.tensor(TensorHandle(arr, like.handle.dtype), tl.block_type(like.dtype, list(arr.shape)))

    def index(q, T, REVERSE):
        return int(T) - 1 - int(q) if REVERSE else int(q)

    def pick(x, q, T, REVERSE):  # noqa: F811
        data = x.handle.data
        return wrap(np.ascontiguousarray(data[:, :, index(q, T, REVERSE) if data.shape[2] > 1 else 0]), x)

    def put(acc, v, q, T, REVERSE):  # noqa: F811
        arr = acc.handle.data.copy()
        arr[:, :, index(q, T, REVERSE)] = v.handle.data
        return wrap(arr, acc)

    def from_lane(x, src):  # noqa: F811
        idx = np.broadcast_to(src.handle.data, x.handle.data.shape)
        return wrap(np.take_along_axis(x.handle.data, idx, 1), x)


@helper
def lane_prev(x, lane, off: tl.constexpr, LANES: tl.constexpr, REVERSE: tl.constexpr):
    """The value ``off`` lanes earlier in scan order (clamped at the chunk's first lane)."""
    if REVERSE:
        src = tl.minimum(lane + off, LANES - 1)
    else:
        src = tl.maximum(lane - off, 0)
    return from_lane(x, src[None, :])


if INTERPRETED:

    def lane_prev(x, lane, off, LANES, REVERSE):  # noqa: F811
        lanes = np.arange(int(LANES))
        src = np.minimum(lanes + int(off), int(LANES) - 1) if REVERSE else np.maximum(lanes - int(off), 0)
        return wrap(np.ascontiguousarray(x.handle.data[:, src]), x)


@helper
def has_prev(lane, off: tl.constexpr, LANES: tl.constexpr, REVERSE: tl.constexpr):
    if REVERSE:
        return (lane < LANES - off)[None, :]
    else:
        return (lane >= off)[None, :]


@helper
def first_lane(lane, LANES: tl.constexpr, REVERSE: tl.constexpr):
    if REVERSE:
        return (lane == LANES - 1)[None, :]
    else:
        return (lane == 0)[None, :]


@helper
def lane_scan(TA, TX, lane, LANES: tl.constexpr, REVERSE: tl.constexpr):
    """Inclusive scan of the threads' ``(decay, input)`` totals across the lanes in scan order (Kogge-Stone):
    ``TX`` becomes the state at the end of each thread's steps."""
    off: tl.constexpr = 1
    for _ in tl.static_range(LANES.bit_length() - 1):
        pX = lane_prev(TX, lane, off, LANES, REVERSE)
        m = has_prev(lane, off, LANES, REVERSE)
        if off * 2 < LANES:  # (the decays' products are not needed after the last level)
            pA = lane_prev(TA, lane, off, LANES, REVERSE)
            TX = tl.where(m, TA * pX + TX, TX)
            TA = tl.where(m, TA * pA, TA)
        else:
            TX = tl.where(m, TA * pX + TX, TX)
        off = off * 2
    return TX


@helper
def thread_entry(a, x, TA, h_in, lane, T: tl.constexpr, LANES: tl.constexpr, REVERSE: tl.constexpr):
    """The states entering each thread's steps and leaving the chunk, ``(h_entry, exit)``, both ``(BD, LANES)``
    (``exit`` the same in every lane), from the decays ``a`` and inputs ``x`` of the chunk tile, each thread's total
    decay ``TA`` and the state entering the chunk ``h_in (BD,)``: the thread's total input by the in-thread
    recurrence from 0, then the scan of the totals across the lanes."""
    TX = pick(x, 0, T, REVERSE)
    for q in tl.static_range(1, T):
        TX = pick(a, q, T, REVERSE) * TX + pick(x, q, T, REVERSE)
    first = first_lane(lane, LANES, REVERSE)
    TX = tl.where(first, TA * h_in[:, None] + TX, TX)
    TX = lane_scan(TA, TX, lane, LANES, REVERSE)
    h = tl.where(first, h_in[:, None], lane_prev(TX, lane, 1, LANES, REVERSE))
    if REVERSE:
        last_lane = 0
    else:
        last_lane = LANES - 1
    return h, from_lane(TX, tl.full((1, LANES), last_lane, tl.int32))


@helper
def chunk_adjoint(a, g, TB, a_next, mu, lane, T: tl.constexpr, LANES: tl.constexpr, REVERSE: tl.constexpr):
    """The adjoint of one chunk and state, ``lam_s = g_s + a_{s+1} lam_{s+1}`` in reverse scan order: ``(lam, carry)``
    with ``lam (BD, LANES, T)`` and the carry to the previous chunk ``a_first lam_first (BD, LANES)``. ``TB`` is each
    thread's product of ``a_{s+1}`` over its steps, ``a_next`` the decay of the next thread's first step (1 for the
    chunk's last lane, whose successor term is ``mu = a_{s+1} lam_{s+1}`` from the next chunk)."""
    RX = pick(g, T - 1, T, REVERSE)
    for qr in tl.static_range(1, T):
        q = T - 1 - qr
        RX = pick(a, q + 1, T, REVERSE) * RX + pick(g, q, T, REVERSE)
    last = first_lane(lane, LANES, not REVERSE)
    RX = tl.where(last, TB * mu[:, None] + RX, RX)
    RX = lane_scan(TB, RX, lane, LANES, not REVERSE)
    lam = tl.where(last, mu[:, None], a_next * lane_prev(RX, lane, 1, LANES, not REVERSE))
    lams = g
    for qr in tl.static_range(T):
        q = T - 1 - qr
        if qr == 0:
            lam = lam + pick(g, q, T, REVERSE)
        else:
            lam = pick(a, q + 1, T, REVERSE) * lam + pick(g, q, T, REVERSE)
        lams = put(lams, lam, q, T, REVERSE)
    if REVERSE:
        lane0 = LANES - 1
    else:
        lane0 = 0
    carry = from_lane(pick(a, 0, T, REVERSE) * lam, tl.full((1, LANES), lane0, tl.int32))
    return lams, carry
