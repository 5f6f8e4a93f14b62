"""Triton kernels of the pruned NCP backbone (:mod:`neurodyn.ops.ncp_mlp`): forward, and backward by recomputation.
Loaded by :func:`neurodyn.ops.triton_loader.load` only; the operators are in :mod:`neurodyn.ops.ncp_mlp.triton_op`.

On packed weights (:func:`neurodyn.ops.ncp_mlp.pack_layers`: the synapse patterns applied, layer ``l`` zero-padded to
its own width ``H_l``, a multiple of ``CHUNK = 16``, and the input to ``A``, a power of two >= 16; each cell's
weights flattened layer after layer)::

    xs  = x * in_scale + in_shift            (or x)                                  x: (C, M, a)
    s_l = act([xs W_in[c, l]] + b[c, l] + [s_{l-1} W_rec[c, l]]) * mask[l]            W_in[c, l]: (A, H_l)
    y   = s_{n-1}[:, :, :h_out]                                                      W_rec[c, l]: (H_{l-1}, H_l)

(the input term only for the layers listed in ``INPUTS``, the recurrent one from layer 1 on; the padding is zeros, so
the padded neurons stay 0). The widths are constants of the kernels (``WIDTHS``, a tuple: NAC's 73 / 33 / 2 neurons
are computed as 80 / 48 / 16, not three times 128) and everything is unrolled: a layer's activations are a tuple of
``(BM, 16)`` chunks held in registers, and every product is one ``16 x 16`` block of weights (``tl.dot`` of a chunk
by a block), so that no operand grows with the width (Triton's chained products put every warp on all rows of a
tile and give each the whole ``K x N`` weight operand: 73 neurons padded to 128 needed 255 registers and spilled).
The first layer, NAC's widest, is never held whole: its chunks are recomputed (one 16-wide product of ``xs``) where the
second layer reads them, each used for all of the second layer's chunks at once. One program per (cell, block of ``BM``
rows, one warp per 16 rows); nothing is left to the software pipeliner (``num_stages = 1``): the weights are read once
per program from L2, nothing is staged in shared memory beyond the layout conversions of the products.

Backward (``BM`` of 16 to 64 rows, :func:`backward_tile`: the weight gradients reduce over the program's rows inside its
products; the first layer's chunks unrolled, or walked by a loop of the kernel where unrolled code spills): the program
recomputes its rows' layer outputs (the forward saves nothing; the layers after the first kept in registers) and walks
the layers from the last, with ``g_l = dLoss/ds_l`` (``g_{n-1}`` the output's gradient)::

    p_l = g_l * mask[l] * act'(s_l)          (act' read from s_l: 1 - s^2, s (1 - s), [s > 0], 1)
    gW_in[c, l] += xs^T p_l,  gb[c, l] += sum_rows p_l,  gW_rec[c, l] += s_{l-1}^T p_l,
    gxs += p_l W_in[c, l]^T,  g_{l-1} = p_l W_rec[c, l]^T
    gx = gxs * in_scale,  g_in_scale[c] += sum_rows gxs x,  g_in_shift[c] += sum_rows gxs

``g_{l-1}`` is turned into ``p_{l-1}`` chunk by chunk as it is formed (the first layer's chunks recomputed there).
The per-cell weight gradients are summed over the programs with relaxed ``tl.atomic_add`` (reductions, no returned
value) into float32 buffers of ``slots`` copies (program ``i`` adds into copy ``i % slots``, so that fewer programs
contend for one address; the launcher sums the copies).

Precision of the products (``tl.dot``'s ``input_precision``), decided by accuracy against the float64 reference at
NAC's widths (:func:`tf32_error`: the operands rounded as the tensor cores round them; NAC's layout, tanh, 2 cells x
2048 rows, seeds 0 and 1, the cpu preset's 73 / 33 / 2 neurons with 16 inputs, the paper presets' 146 / 67 / 2 with
16 and 33 / 16 / 2 with 4, and 36 / 16 / 2 with 8; norm-wise relative errors, output / worst of the weight and input
gradients):

* float32 products (``"ieee"``): 0.9e-7 to 2.2e-7 / 7.0e-7 to 9.5e-7;
* TF32 (``"tf32"``, 10-bit mantissas): 3.0e-4 to 5.7e-4 / 6.2e-4 to 7.5e-4, three orders above float32;
* 3xTF32 (``"tf32x3"``, each operand split into two TF32 halves, three products): 1.2e-7 to 2.4e-7 / 6.1e-7 to
  1.0e-6, float32's accuracy.

So the forward runs 3xTF32 (:data:`PRECISION`): its output, which every later layer of NAC reads, keeps float32's
accuracy, on the tensor cores. The backward runs TF32 (:data:`BACKWARD_PRECISION`): its gradients carry about 7e-4
relative error (below bf16's 2^-9 = 2e-3 rounding of every value under bf16 autocast), and are read only by the
optimiser and by the layers below; the float32-accurate choices cannot be built without spilling (ptxas for sm_90,
this design unrolled: float32 products spill 3 to 27 KB, 3xTF32 8 to 300 B at every tile tried, 1 to 8 warps). The
interpreter computes every product in float32 (it ignores ``input_precision``), so the CPU tests check the algebra
exactly; the CUDA tests allow the backward's TF32 error.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from neurodyn.ops.triton_loader import shared, target_arch

common = shared()  # rsum (this build's)

PRECISION = "tf32x3"  # the forward's products
BACKWARD_PRECISION = "tf32"  # the backward's
CHUNK = 16  # neurons per chunk: the widths are multiples of it (ncp_mlp.pack_layers), every product a 16-wide block


@triton.jit
def _act(v, ACT: tl.constexpr):
    """The activation by code (0 linear, 1 tanh, 2 relu, 3 sigmoid); tanh from ``exp(-2|v|)`` (no overflow)."""
    if ACT == 1:
        e = tl.exp(-2.0 * tl.abs(v))
        r = (1.0 - e) / (1.0 + e)
        out = tl.where(v < 0.0, -r, r)
    elif ACT == 2:
        out = tl.maximum(v, 0.0)
    elif ACT == 3:
        out = 1.0 / (1.0 + tl.exp(-v))
    else:
        out = v
    return out


@triton.jit
def _act_grad(s, ACT: tl.constexpr):
    """``act'(pre)`` from ``s = act(pre)``."""
    if ACT == 1:
        d = 1.0 - s * s
    elif ACT == 2:
        d = tl.where(s > 0.0, 1.0, 0.0)
    elif ACT == 3:
        d = s * (1.0 - s)
    else:
        d = s * 0.0 + 1.0
    return d


@triton.jit
def _inputs(
    x_ptr, sc_ptr, sh_ptr, c, M, a, ACC: tl.constexpr, A: tl.constexpr, BM: tl.constexpr, HAS_AFFINE: tl.constexpr
):
    """A program's rows: ``(offs_m, row mask, x (BM, A), xs (BM, A), in_scale (A,))`` (zeros past ``a``; padded
    rows read 0, and their xs, ``in_shift``, never reach an output or a gradient)."""
    offs_m = tl.program_id(1) * BM + tl.arange(0, BM)
    offs_a = tl.arange(0, A)
    mm = offs_m < M
    ma = offs_a < a
    x = tl.load(x_ptr + (c * M + offs_m)[:, None] * a + offs_a[None, :], mask=mm[:, None] & ma[None, :], other=0.0).to(
        ACC
    )
    xs = x
    scale = tl.full((A,), 1.0, ACC)
    if HAS_AFFINE:
        scale = tl.load(sc_ptr + c * a + offs_a, mask=ma, other=0.0).to(ACC)
        xs = x * scale[None, :] + tl.load(sh_ptr + c * a + offs_a, mask=ma, other=0.0).to(ACC)[None, :]
    return offs_m, mm, x, xs, scale


@triton.jit
def _block(ptr, base, row0, col0, stride, R: tl.constexpr, CH: tl.constexpr, ACC: tl.constexpr):
    """The ``(R, CH)`` block at ``(row0, col0)`` of a row-major matrix with ``stride`` columns at ``ptr + base`` (a
    scalar offset added to one offset tile shared by the blocks)."""
    tile = tl.arange(0, R)[:, None] * stride + tl.arange(0, CH)[None, :]
    return tl.load((ptr + (base + row0 * stride + col0)) + tile).to(ACC)


@triton.jit
def _first_chunk(
    xs,
    w_in_ptr,
    b_ptr,
    m_ptr,
    c,
    tot_in,
    tot_h,
    j,
    ACC: tl.constexpr,
    A: tl.constexpr,
    CH: tl.constexpr,
    WIDTHS: tl.constexpr,
    INPUTS: tl.constexpr,
    OFF_IN: tl.constexpr,
    OFF_H: tl.constexpr,
    ACT: tl.constexpr,
    PREC: tl.constexpr,
):
    """Chunk ``j`` of the first layer's output (it reads only ``xs``: the backward recomputes it where needed)."""
    offs = OFF_H[0] + j * CH + tl.arange(0, CH)
    pre = tl.load(b_ptr + c * tot_h + offs).to(ACC)[None, :]
    if INPUTS[0]:
        pre = pre + tl.dot(
            xs, _block(w_in_ptr, c * tot_in + OFF_IN[0], 0, j * CH, WIDTHS[0], A, CH, ACC), input_precision=PREC
        )
    else:
        pre = pre + tl.full((xs.shape[0], CH), 0.0, ACC)
    return _act(pre, ACT) * tl.load(m_ptr + offs).to(ACC)[None, :]


@triton.jit
def _layer(
    xs,
    s_prev,
    w_in_ptr,
    b_ptr,
    w_rec_ptr,
    m_ptr,
    c,
    tot_in,
    tot_h,
    tot_rec,
    l: tl.constexpr,
    ACC: tl.constexpr,
    A: tl.constexpr,
    CH: tl.constexpr,
    WIDTHS: tl.constexpr,
    INPUTS: tl.constexpr,
    OFF_IN: tl.constexpr,
    OFF_H: tl.constexpr,
    OFF_REC: tl.constexpr,
    ACT: tl.constexpr,
    PREC: tl.constexpr,
):
    """``s_l`` from ``s_{l-1}`` (module docstring), both tuples of ``(BM, CH)`` chunks of neurons. For ``l = 1`` with
    ``s_prev`` empty, the first layer's chunks are recomputed one at a time, each used for every output chunk at
    once (the pre-activations accumulated together), so that only one of them is live."""
    H: tl.constexpr = WIDTHS[l]
    pre = ()
    for j in tl.static_range(H // CH):
        offs = OFF_H[l] + j * CH + tl.arange(0, CH)
        pj = tl.load(b_ptr + c * tot_h + offs).to(ACC)[None, :] + tl.full((xs.shape[0], CH), 0.0, ACC)
        if INPUTS[l]:
            pj = pj + tl.dot(
                xs, _block(w_in_ptr, c * tot_in + OFF_IN[l], 0, j * CH, H, A, CH, ACC), input_precision=PREC
            )
        if l > 0 and len(s_prev) > 0:
            for i in tl.static_range(WIDTHS[l - 1] // CH):
                pj = pj + tl.dot(
                    s_prev[i],
                    _block(w_rec_ptr, c * tot_rec + OFF_REC[l], i * CH, j * CH, H, CH, CH, ACC),
                    input_precision=PREC,
                )
        pre = pre + (pj,)
    if l > 0 and len(s_prev) == 0:
        for i in tl.static_range(WIDTHS[l - 1] // CH):
            si = _first_chunk(
                xs, w_in_ptr, b_ptr, m_ptr, c, tot_in, tot_h, i, ACC, A, CH, WIDTHS, INPUTS, OFF_IN, OFF_H, ACT, PREC
            )
            for j in tl.static_range(H // CH):
                w = _block(w_rec_ptr, c * tot_rec + OFF_REC[l], i * CH, j * CH, H, CH, CH, ACC)
                pre = pre[:j] + (pre[j] + tl.dot(si, w, input_precision=PREC),) + pre[j + 1 :]
    out = ()
    for j in tl.static_range(H // CH):
        offs = OFF_H[l] + j * CH + tl.arange(0, CH)
        out = out + (_act(pre[j], ACT) * tl.load(m_ptr + offs).to(ACC)[None, :],)
    return out


@triton.jit
def _chunk_grad(
    k: tl.constexpr,
    j,
    gj,
    sj,
    gxs,
    xs,
    w_in_ptr,
    m_ptr,
    gw_in_ptr,
    gb_ptr,
    c,
    slot,
    tot_in,
    tot_h,
    ACC: tl.constexpr,
    A: tl.constexpr,
    CH: tl.constexpr,
    WIDTHS: tl.constexpr,
    INPUTS: tl.constexpr,
    OFF_IN: tl.constexpr,
    OFF_H: tl.constexpr,
    ACT: tl.constexpr,
    PREC: tl.constexpr,
):
    """Chunk ``j`` of layer ``k``: ``p = g mask act'(s)`` from its ``g`` and ``s`` chunks, the bias's and input
    weights' gradients added into the program's slot; returns ``(p, gxs)`` (``gxs += p W_in^T``)."""
    H: tl.constexpr = WIDTHS[k]
    offs_c = tl.arange(0, CH)
    offs_a = tl.arange(0, A)
    offs = OFF_H[k] + j * CH + offs_c
    pj = gj * tl.load(m_ptr + offs).to(ACC)[None, :] * _act_grad(sj, ACT)
    tl.atomic_add(gb_ptr + slot * tot_h + offs, common.rsum(pj, 0), sem="relaxed")
    if INPUTS[k]:
        at = slot * tot_in + OFF_IN[k] + offs_a[:, None] * H + (j * CH + offs_c)[None, :]
        tl.atomic_add(gw_in_ptr + at, tl.dot(tl.trans(xs), pj, input_precision=PREC), sem="relaxed")
        w_in = _block(w_in_ptr, c * tot_in + OFF_IN[k], 0, j * CH, H, A, CH, ACC)
        gxs += tl.dot(pj, tl.trans(w_in), input_precision=PREC)
    return pj, gxs


@triton.jit
def _rec_weight_grad(
    si,
    p,
    gw_rec_ptr,
    slot,
    tot_rec,
    i,
    k: tl.constexpr,
    CH: tl.constexpr,
    WIDTHS: tl.constexpr,
    OFF_REC: tl.constexpr,
    PREC: tl.constexpr,
):
    """``gW_rec[c, k]``'s row block ``i`` += ``s_{k-1}``'s chunk ``i`` (``si``)^T times each chunk of ``p_k``, added
    into the program's slot."""
    H: tl.constexpr = WIDTHS[k]
    offs_c = tl.arange(0, CH)
    blk = offs_c[:, None] * H + offs_c[None, :]  # a (CH, CH) block's offsets (one tile for every block's address)
    for j in tl.static_range(H // CH):
        at = (gw_rec_ptr + (slot * tot_rec + OFF_REC[k] + i * CH * H + j * CH)) + blk
        tl.atomic_add(at, tl.dot(tl.trans(si), p[j], input_precision=PREC), sem="relaxed")


@triton.jit
def _grad_through_rec(
    p,
    w_rec_ptr,
    c,
    tot_rec,
    i,
    k: tl.constexpr,
    ACC: tl.constexpr,
    CH: tl.constexpr,
    WIDTHS: tl.constexpr,
    OFF_REC: tl.constexpr,
    PREC: tl.constexpr,
):
    """Chunk ``i`` of ``g_{k-1} = p_k W_rec[c, k]^T`` from the chunks of ``p_k``."""
    H: tl.constexpr = WIDTHS[k]
    acc = tl.full(p[0].shape, 0.0, ACC)
    for j in tl.static_range(H // CH):
        w_rec = _block(w_rec_ptr, c * tot_rec + OFF_REC[k], i * CH, j * CH, H, CH, CH, ACC)
        acc += tl.dot(p[j], tl.trans(w_rec), input_precision=PREC)
    return acc


@triton.jit
def _layer_grad(
    k: tl.constexpr,
    p,
    s_prev,
    gxs,
    xs,
    w_in_ptr,
    b_ptr,
    w_rec_ptr,
    m_ptr,
    gw_in_ptr,
    gb_ptr,
    gw_rec_ptr,
    c,
    slot,
    tot_in,
    tot_h,
    tot_rec,
    ACC: tl.constexpr,
    A: tl.constexpr,
    CH: tl.constexpr,
    WIDTHS: tl.constexpr,
    INPUTS: tl.constexpr,
    OFF_IN: tl.constexpr,
    OFF_H: tl.constexpr,
    OFF_REC: tl.constexpr,
    ACT: tl.constexpr,
    PREC: tl.constexpr,
):
    """From the chunks of ``p_k`` (``k >= 2``) and ``s_{k-1}``: the recurrent weights' gradient of layer ``k`` and
    ``g_{k-1} = p_k W_rec^T``, turned chunk by chunk into ``p_{k-1}`` (:func:`_chunk_grad`); returns ``(p_{k-1} as
    chunks, gxs)``."""
    # two passes over the previous layer's chunks (p's chunks are operands of two products: one layout per pass)
    for i in tl.static_range(WIDTHS[k - 1] // CH):  # the recurrent weights' gradient
        _rec_weight_grad(s_prev[i], p, gw_rec_ptr, slot, tot_rec, i, k, CH, WIDTHS, OFF_REC, PREC)
    p_prev = ()
    for i in tl.static_range(WIDTHS[k - 1] // CH):  # g_{k-1} = p_k W_rec^T, then p_{k-1}
        acc = _grad_through_rec(p, w_rec_ptr, c, tot_rec, i, k, ACC, CH, WIDTHS, OFF_REC, PREC)
        pi, gxs = _chunk_grad(
            k - 1,
            i,
            acc,
            s_prev[i],
            gxs,
            xs,
            w_in_ptr,
            m_ptr,
            gw_in_ptr,
            gb_ptr,
            c,
            slot,
            tot_in,
            tot_h,
            ACC,
            A,
            CH,
            WIDTHS,
            INPUTS,
            OFF_IN,
            OFF_H,
            ACT,
            PREC,
        )
        p_prev = p_prev + (pi,)
    return p_prev, gxs


@triton.jit
def _first_layer_grad(
    p,
    gxs,
    xs,
    w_in_ptr,
    b_ptr,
    w_rec_ptr,
    m_ptr,
    gw_in_ptr,
    gb_ptr,
    gw_rec_ptr,
    c,
    slot,
    tot_in,
    tot_h,
    tot_rec,
    ACC: tl.constexpr,
    A: tl.constexpr,
    CH: tl.constexpr,
    WIDTHS: tl.constexpr,
    INPUTS: tl.constexpr,
    OFF_IN: tl.constexpr,
    OFF_H: tl.constexpr,
    OFF_REC: tl.constexpr,
    ACT: tl.constexpr,
    PREC: tl.constexpr,
    UNROLL: tl.constexpr,
):
    """Layer 1's part (:func:`_layer_grad` with ``k = 1``) from the chunks of ``p_1``: the recurrent weights' gradient
    and ``g_0 = p_1 W_rec^T`` turned into ``p_0`` chunk by chunk, each first-layer chunk recomputed where it is read
    (no whole first layer is ever live: NAC's widest); returns ``gxs``. ``UNROLL``: the first layer's chunks per trip
    of its two loops (all of them: unrolled; 1: a loop of the kernel, which keeps the compiler from hoisting every
    chunk's weight loads, where unrolled code spills: :func:`backward_tile`)."""
    for i in tl.range(0, WIDTHS[0] // CH, loop_unroll_factor=UNROLL):  # the recurrent weights' gradient
        si = _first_chunk(
            xs, w_in_ptr, b_ptr, m_ptr, c, tot_in, tot_h, i, ACC, A, CH, WIDTHS, INPUTS, OFF_IN, OFF_H, ACT, PREC
        )
        _rec_weight_grad(si, p, gw_rec_ptr, slot, tot_rec, i, 1, CH, WIDTHS, OFF_REC, PREC)
    for i in tl.range(0, WIDTHS[0] // CH, loop_unroll_factor=UNROLL):  # g_0 = p_1 W_rec^T, then p_0
        acc = _grad_through_rec(p, w_rec_ptr, c, tot_rec, i, 1, ACC, CH, WIDTHS, OFF_REC, PREC)
        si = _first_chunk(
            xs, w_in_ptr, b_ptr, m_ptr, c, tot_in, tot_h, i, ACC, A, CH, WIDTHS, INPUTS, OFF_IN, OFF_H, ACT, PREC
        )
        _, gxs = _chunk_grad(
            0,
            i,
            acc,
            si,
            gxs,
            xs,
            w_in_ptr,
            m_ptr,
            gw_in_ptr,
            gb_ptr,
            c,
            slot,
            tot_in,
            tot_h,
            ACC,
            A,
            CH,
            WIDTHS,
            INPUTS,
            OFF_IN,
            OFF_H,
            ACT,
            PREC,
        )
    return gxs


@triton.jit
def _ncp_fwd_kernel(
    x_ptr,
    sc_ptr,
    sh_ptr,
    w_in_ptr,
    b_ptr,
    w_rec_ptr,
    m_ptr,
    y_ptr,
    M,
    a,
    h_out,
    tot_in,
    tot_h,
    tot_rec,
    ACC: tl.constexpr,
    A: tl.constexpr,
    BM: tl.constexpr,
    CH: tl.constexpr,
    ACT: tl.constexpr,
    HAS_AFFINE: tl.constexpr,
    WIDTHS: tl.constexpr,
    INPUTS: tl.constexpr,
    OFF_IN: tl.constexpr,
    OFF_H: tl.constexpr,
    OFF_REC: tl.constexpr,
    PREC: tl.constexpr,
):
    NL: tl.constexpr = len(WIDTHS)
    c = tl.program_id(0).to(tl.int64)  # (64-bit offsets: tensors past 2^31 elements)
    offs_m, mm, x, xs, scale = _inputs(x_ptr, sc_ptr, sh_ptr, c, M, a, ACC, A, BM, HAS_AFFINE)
    # the first layer only as chunks recomputed where the second reads them (registers: it is NAC's widest)
    s = ()
    for l in tl.static_range(1 if NL > 1 else 0, NL):
        s = _layer(
            xs,
            s,
            w_in_ptr,
            b_ptr,
            w_rec_ptr,
            m_ptr,
            c,
            tot_in,
            tot_h,
            tot_rec,
            l,
            ACC,
            A,
            CH,
            WIDTHS,
            INPUTS,
            OFF_IN,
            OFF_H,
            OFF_REC,
            ACT,
            PREC,
        )
    for j in tl.static_range(WIDTHS[NL - 1] // CH):
        offs = j * CH + tl.arange(0, CH)
        tl.store(
            y_ptr + (c * M + offs_m)[:, None] * h_out + offs[None, :], s[j], mask=mm[:, None] & (offs < h_out)[None, :]
        )


@triton.jit
def _ncp_bwd_kernel(
    x_ptr,
    sc_ptr,
    sh_ptr,
    w_in_ptr,
    b_ptr,
    w_rec_ptr,
    m_ptr,
    gy_ptr,
    gx_ptr,
    gw_in_ptr,
    gb_ptr,
    gw_rec_ptr,
    gsc_ptr,
    gsh_ptr,
    M,
    a,
    h_out,
    tot_in,
    tot_h,
    tot_rec,
    slots,
    ACC: tl.constexpr,
    A: tl.constexpr,
    BM: tl.constexpr,
    CH: tl.constexpr,
    ACT: tl.constexpr,
    HAS_AFFINE: tl.constexpr,
    WIDTHS: tl.constexpr,
    INPUTS: tl.constexpr,
    OFF_IN: tl.constexpr,
    OFF_H: tl.constexpr,
    OFF_REC: tl.constexpr,
    PREC: tl.constexpr,
    UNROLL: tl.constexpr,
):
    NL: tl.constexpr = len(WIDTHS)
    c = tl.program_id(0).to(tl.int64)
    offs_m, mm, x, xs, scale = _inputs(x_ptr, sc_ptr, sh_ptr, c, M, a, ACC, A, BM, HAS_AFFINE)
    offs_a = tl.arange(0, A)
    # the layer outputs, recomputed and kept in registers (ss[l] = the chunks of s_l) but for the first layer, whose
    # chunks are recomputed one at a time where they are read: it reads only xs, and is NAC's widest
    s = ()
    ss = ((),)
    for l in tl.static_range(1, NL):
        s = _layer(
            xs,
            s,
            w_in_ptr,
            b_ptr,
            w_rec_ptr,
            m_ptr,
            c,
            tot_in,
            tot_h,
            tot_rec,
            l,
            ACC,
            A,
            CH,
            WIDTHS,
            INPUTS,
            OFF_IN,
            OFF_H,
            OFF_REC,
            ACT,
            PREC,
        )
        ss = ss + (s,)
    gxs = tl.full((BM, A), 0.0, ACC)
    slot = c * slots + tl.program_id(1) % slots  # this program's copy of the gradient buffers
    p = ()  # the last layer's p, from the output's gradient
    for j in tl.static_range(WIDTHS[NL - 1] // CH):
        offs = j * CH + tl.arange(0, CH)
        gj = tl.load(
            gy_ptr + (c * M + offs_m)[:, None] * h_out + offs[None, :],
            mask=mm[:, None] & (offs < h_out)[None, :],
            other=0.0,
        ).to(ACC)
        if NL == 1:
            sj = _first_chunk(
                xs, w_in_ptr, b_ptr, m_ptr, c, tot_in, tot_h, j, ACC, A, CH, WIDTHS, INPUTS, OFF_IN, OFF_H, ACT, PREC
            )
        else:
            sj = ss[NL - 1][j]
        pj, gxs = _chunk_grad(
            NL - 1,
            j,
            gj,
            sj,
            gxs,
            xs,
            w_in_ptr,
            m_ptr,
            gw_in_ptr,
            gb_ptr,
            c,
            slot,
            tot_in,
            tot_h,
            ACC,
            A,
            CH,
            WIDTHS,
            INPUTS,
            OFF_IN,
            OFF_H,
            ACT,
            PREC,
        )
        p = p + (pj,)
    for i in tl.static_range(NL - 2):  # layer k = NL - 1 - i down to 2 (tuple indices written out: constants)
        p, gxs = _layer_grad(
            NL - 1 - i,
            p,
            ss[NL - 2 - i],
            gxs,
            xs,
            w_in_ptr,
            b_ptr,
            w_rec_ptr,
            m_ptr,
            gw_in_ptr,
            gb_ptr,
            gw_rec_ptr,
            c,
            slot,
            tot_in,
            tot_h,
            tot_rec,
            ACC,
            A,
            CH,
            WIDTHS,
            INPUTS,
            OFF_IN,
            OFF_H,
            OFF_REC,
            ACT,
            PREC,
        )
    if NL > 1:
        gxs = _first_layer_grad(
            p,
            gxs,
            xs,
            w_in_ptr,
            b_ptr,
            w_rec_ptr,
            m_ptr,
            gw_in_ptr,
            gb_ptr,
            gw_rec_ptr,
            c,
            slot,
            tot_in,
            tot_h,
            tot_rec,
            ACC,
            A,
            CH,
            WIDTHS,
            INPUTS,
            OFF_IN,
            OFF_H,
            OFF_REC,
            ACT,
            PREC,
            UNROLL,
        )
    ma = offs_a < a
    tl.store(
        gx_ptr + (c * M + offs_m)[:, None] * a + offs_a[None, :], gxs * scale[None, :], mask=mm[:, None] & ma[None, :]
    )
    if HAS_AFFINE:
        tl.atomic_add(gsc_ptr + c * a + offs_a, common.rsum(gxs * x, 0), mask=ma, sem="relaxed")
        tl.atomic_add(gsh_ptr + c * a + offs_a, common.rsum(gxs, 0), mask=ma, sem="relaxed")


# ---------------------------------------------------------------------------------------------------------------
# launchers (arguments prepared by neurodyn.ops.ncp_mlp.triton_op)


def layout(a_pad: int, widths, inputs) -> dict:
    """The packed layout's constants: per-layer offsets of the input weights (``(A, H_l)`` blocks of the layers with an
    input term), biases / masks and recurrent weights (``(H_{l-1}, H_l)`` from layer 1) in each cell's flat vectors,
    and the vectors' lengths."""
    off_in, off_h, off_rec = [], [], []
    tin = th = trec = 0
    for l, H in enumerate(widths):
        off_in.append(tin)
        off_h.append(th)
        off_rec.append(trec)
        tin += a_pad * H if inputs[l] else 0
        th += H
        trec += widths[l - 1] * H if l > 0 else 0
    return dict(
        OFF_IN=tuple(off_in),
        OFF_H=tuple(off_h),
        OFF_REC=tuple(off_rec),
        tot_in=max(tin, 1),
        tot_h=th,
        tot_rec=max(trec, 1),
    )


def warps(block_m: int) -> int:
    """One warp per 16 rows (an MMA tile's height), 1 to 8."""
    return max(1, min(8, block_m // 16))


def _meta(x, widths, inputs, act, block_m, affine):
    A = max(16, triton.next_power_of_2(x.shape[2]))
    lay = layout(A, widths, inputs)
    sizes = (lay.pop("tot_in"), lay.pop("tot_h"), lay.pop("tot_rec"))
    return sizes, dict(
        ACC=tl.float32,
        A=A,
        BM=block_m,
        CH=CHUNK,
        ACT=act,
        HAS_AFFINE=affine,
        WIDTHS=tuple(widths),
        INPUTS=tuple(int(i) for i in inputs),
        **lay,
        num_warps=warps(block_m),
        num_stages=1,
    )


def fwd(x, w_in, bias, w_rec, mask, in_scale, in_shift, widths, inputs, act, h_out, block_m):
    """``y (C, M, h_out)`` in x's dtype (arguments: the packed layers, module docstring)."""
    C, M, a = x.shape
    y = x.new_empty(C, M, h_out)
    affine = in_scale is not None
    sizes, meta = _meta(x, widths, inputs, act, block_m, affine)
    if y.numel():
        _ncp_fwd_kernel[(C, triton.cdiv(M, block_m))](
            x,
            in_scale if affine else x,
            in_shift if affine else x,
            w_in,
            bias,
            w_rec,
            mask,
            y,
            M,
            a,
            h_out,
            *sizes,
            **meta,
            PREC=PRECISION,
        )
    return y


GRAD_SLOTS = 16  # copies of the weight-gradient buffers (unmeasured: no GPU run yet)


WIDE_FIRST_LAYER = 128  # packed first-layer neurons above which sm_80's backward walks them by a loop of the kernel


def backward_tile(x, widths) -> tuple[int, bool]:
    """``(rows, loop)`` of the backward: rows per program (one warp per 16 rows; its weight gradients reduce over the
    program's rows inside its products) and whether the first layer's chunks are walked by a loop of the kernel
    (else unrolled), the choices at which ptxas (triton 3.9) keeps it from spilling with the fewest instructions per
    element, measured at NAC's widths (packed 80 / 48 / 16, 160 / 80 / 16 and 48 / 16 / 16 neurons; ``neurodyn bench
    kernels``): from sm_90 on ``(16, False)`` (160 first-layer neurons: 186 registers, 117 instructions per element);
    on sm_80 ``(32, False)`` up to :data:`WIDE_FIRST_LAYER` first-layer neurons, else ``(64, True)`` (160 neurons
    unrolled spilled 1,108 B at 32 rows and more at 64; as a loop: 16 rows spilled 20 B, 32 rows 52 B, 64 rows none,
    152 instructions per element). The target is the tensors' GPU, or the driver's (the static report's stand-in);
    ``(16, False)`` in the interpreter."""
    capability = target_arch(x)
    if 0 < capability < 90:
        return (64, True) if widths[0] > WIDE_FIRST_LAYER else (32, False)
    return 16, False


def bwd(x, w_in, bias, w_rec, mask, in_scale, in_shift, gy, widths, inputs, act, block_m):
    """``(gw_in, gbias, gw_rec like the packed layers, g_in_scale, g_in_shift (C, a) or empty, gx like x)``, all but
    gx in float32."""
    C, M, a = x.shape
    rows, loop = backward_tile(x, widths)
    block_m = min(block_m, rows)
    blocks = triton.cdiv(M, block_m)
    slots = max(min(blocks, GRAD_SLOTS), 1)
    f32 = dict(dtype=torch.float32, device=x.device)
    sizes, meta = _meta(x, widths, inputs, act, block_m, in_scale is not None)
    gx = torch.empty_like(x)
    gw_in, gb, gw_rec = (torch.zeros(C, slots, size, **f32) for size in sizes)
    affine = in_scale is not None
    gsc, gsh = (
        (torch.zeros(C, a, **f32) for _ in range(2))
        if affine
        else (x.new_empty(0, dtype=torch.float32), x.new_empty(0, dtype=torch.float32))
    )
    if x.numel():
        _ncp_bwd_kernel[(C, blocks)](
            x,
            in_scale if affine else x,
            in_shift if affine else x,
            w_in,
            bias,
            w_rec,
            mask,
            gy,
            gx,
            gw_in,
            gb,
            gw_rec,
            gsc if affine else gx,
            gsh if affine else gx,
            M,
            a,
            gy.shape[2],
            *sizes,
            slots,
            **meta,
            PREC=BACKWARD_PRECISION,
            UNROLL=1 if loop else widths[0] // CHUNK,
        )
    gw_in, gb, gw_rec = (g.sum(1) for g in (gw_in, gb, gw_rec))
    return gw_in[:, : w_in.shape[1]], gb, gw_rec[:, : w_rec.shape[1]], gsc, gsh, gx


def tf32_error(widths=(73, 33, 2), a: int = 16, rows: int = 2048, cells: int = 2, seed: int = 0) -> dict:
    """Norm-wise relative errors against float64 of the backbone's output and of its weight and input gradients
    (tanh layers, the input into layer 0 only: NAC's layout), with every product's operands rounded as
    ``tl.dot``'s precisions round them: ``"ieee"`` (float32 operands), ``"tf32"`` (each operand rounded to TF32, a
    10-bit mantissa, to nearest) and ``"tf32x3"`` (``a b ~ a_hi b_hi + a_hi b_lo + a_lo b_hi`` with ``a_hi =
    tf32(a)``, ``a_lo = tf32(a - a_hi)``); float32 accumulation. Returns ``{precision: (output error, worst gradient
    error)}``, the gradients computed as the backward kernel computes them (the activations recomputed at that
    precision). The evidence for :data:`PRECISION` and :data:`BACKWARD_PRECISION` (module docstring)."""
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64

    def tf32(t):
        bits = t.float().view(torch.int32)
        bias = ((bits >> 13) & 1) + 0xFFF
        return ((bits + bias) & ~0x1FFF).view(torch.float32)

    def mm(u, v, prec):
        if prec == "f64":
            return u @ v
        u, v = u.float(), v.float()
        if prec == "ieee":
            return u @ v
        uh, vh = tf32(u), tf32(v)
        if prec == "tf32":
            return uh @ vh
        return uh @ vh + (uh @ tf32(v - vh) + tf32(u - uh) @ vh)

    x = torch.randn(cells, rows, a, generator=g, dtype=f64)
    w_in = torch.randn(cells, a, widths[0], generator=g, dtype=f64) / a**0.5
    w_rec = [torch.randn(cells, p, h, generator=g, dtype=f64) / p**0.5 for p, h in zip(widths, widths[1:])]
    bias = [0.3 * torch.randn(cells, h, generator=g, dtype=f64) for h in widths]
    gy = torch.randn(cells, rows, widths[-1], generator=g, dtype=f64)

    def forward(prec):
        ss, s = [], None
        for l, b in enumerate(bias):
            s = torch.tanh(b[:, None, :] + (mm(x, w_in, prec) if l == 0 else mm(s, w_rec[l - 1], prec)))
            ss.append(s)
        return ss

    def backward(prec):
        ss = forward(prec)
        grads, gl = [], gy.to(ss[-1].dtype)
        for l in reversed(range(len(widths))):
            p = gl * (1 - ss[l] * ss[l])
            grads.append(mm(ss[l - 1].transpose(1, 2), p, prec) if l else mm(x.transpose(1, 2), p, prec))
            gl = mm(p, w_rec[l - 1].transpose(1, 2), prec) if l else mm(p, w_in.transpose(1, 2), prec)
        return [*grads, gl]

    rel = lambda u, v: ((u.double() - v).norm() / v.norm()).item()  # noqa: E731
    y_ref, g_ref = forward("f64")[-1], backward("f64")
    return {
        prec: (rel(forward(prec)[-1], y_ref), max(rel(u, v) for u, v in zip(backward(prec), g_ref)))
        for prec in ("ieee", "tf32", "tf32x3")
    }
