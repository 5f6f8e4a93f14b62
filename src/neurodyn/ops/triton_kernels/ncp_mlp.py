"""Triton kernels of the pruned NCP backbone (:mod:`neurodyn.ops.ncp_mlp`): forward, and backward by recomputation.
Loaded by :func:`neurodyn.ops.triton_kernels.load` only; the operators are in :mod:`neurodyn.ops.triton_ops`.

On packed weights (:func:`neurodyn.ops.ncp_mlp.pack_layers`: the synapse patterns applied, every layer padded to one
width ``H`` and the input to ``A``, both powers of two >= 16)::

    xs  = x * in_scale + in_shift            (or x)                                  x: (C, M, a)
    s_l = act(xs W_in[c, l] + b[c, l] + s_{l-1} W_rec[c, l]) * mask[l],  s_{-1} = 0   W_in: (C, n, A, H),
    y   = s_{n-1}[:, :, :h_out]                                                      W_rec: (C, n, H, H)

(``W_rec[:, 0]`` and the padding are zeros, so the padded neurons stay 0). One program per (cell, block of ``BM``
rows): the ``(BM, H)`` activations stay in registers through the layers, each layer two ``tl.dot`` (float32, IEEE
precision) on the program's rows; inputs of any float dtype are converted to float32 as they are loaded.

Backward: the program recomputes its rows' layer outputs into a scratch buffer (the forward saves nothing), then
walks the layers from the last: with ``g_l = dLoss/ds_l`` (``g_{n-1}`` = the output's gradient)::

    p_l = g_l * mask[l] * act'(s_l)          (act' read from s_l: 1 - s^2, s (1 - s), [s > 0], 1)
    gW_in[c, l] += xs^T p_l,  gb[c, l] += sum_rows p_l,  gW_rec[c, l] += s_{l-1}^T p_l,
    gxs += p_l W_in[c, l]^T,  g_{l-1} = p_l W_rec[c, l]^T
    gx = gxs * in_scale,  g_in_scale[c] += sum_rows gxs x,  g_in_shift[c] += sum_rows gxs

The per-cell weight gradients are summed over the programs with ``tl.atomic_add`` into float32 buffers of ``slots``
copies (program ``i`` adds into copy ``i % slots``, so that fewer programs contend for one address; the launcher sums
the copies).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from neurodyn.ops.triton_kernels import shared

common = shared()  # rsum (this build's)


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
def _inputs(x_ptr, sc_ptr, sh_ptr, c, M, a, ACC: tl.constexpr, A: tl.constexpr, BM: tl.constexpr,
            HAS_AFFINE: tl.constexpr):
    """A program's rows: ``(offs_m, row mask, x (BM, A), xs (BM, A), in_scale (A,))`` (zeros past ``a``; padded
    rows read 0, and their xs, ``in_shift``, never reach an output or a gradient)."""
    offs_m = tl.program_id(1) * BM + tl.arange(0, BM)
    offs_a = tl.arange(0, A)
    mm = offs_m < M
    ma = offs_a < a
    x = tl.load(x_ptr + (c * M + offs_m)[:, None] * a + offs_a[None, :], mask=mm[:, None] & ma[None, :],
                other=0.0).to(ACC)
    xs = x
    scale = tl.full((A,), 1.0, ACC)
    if HAS_AFFINE:
        scale = tl.load(sc_ptr + c * a + offs_a, mask=ma, other=0.0).to(ACC)
        xs = x * scale[None, :] + tl.load(sh_ptr + c * a + offs_a, mask=ma, other=0.0).to(ACC)[None, :]
    return offs_m, mm, x, xs, scale


@triton.jit
def _weights(w_in_ptr, b_ptr, w_rec_ptr, m_ptr, c, l, n, ACC: tl.constexpr, A: tl.constexpr, H: tl.constexpr):
    """Layer ``l`` of cell ``c``: ``(W_in (A, H), b (H,), W_rec (H, H), mask (H,))``."""
    offs_a = tl.arange(0, A)
    offs_h = tl.arange(0, H)
    cl = c * n + l
    w_in = tl.load(w_in_ptr + (cl * A + offs_a)[:, None] * H + offs_h[None, :]).to(ACC)
    w_rec = tl.load(w_rec_ptr + (cl * H + offs_h)[:, None] * H + offs_h[None, :]).to(ACC)
    return w_in, tl.load(b_ptr + cl * H + offs_h).to(ACC), w_rec, tl.load(m_ptr + l * H + offs_h).to(ACC)


@triton.jit
def _layer(xs, s, w_in_ptr, b_ptr, w_rec_ptr, m_ptr, c, l, n, ACC: tl.constexpr, A: tl.constexpr,
           H: tl.constexpr, ACT: tl.constexpr):
    """``s_l`` from ``s_{l-1}`` (module docstring)."""
    w_in, b, w_rec, mask = _weights(w_in_ptr, b_ptr, w_rec_ptr, m_ptr, c, l, n, ACC, A, H)
    pre = tl.dot(xs, w_in, input_precision="ieee") + tl.dot(s, w_rec, input_precision="ieee") + b[None, :]
    return _act(pre, ACT) * mask[None, :]


@triton.jit
def _ncp_fwd_kernel(x_ptr, sc_ptr, sh_ptr, w_in_ptr, b_ptr, w_rec_ptr, m_ptr, y_ptr, M, a, n, h_out,
                    ACC: tl.constexpr, A: tl.constexpr, H: tl.constexpr, BM: tl.constexpr, ACT: tl.constexpr,
                    HAS_AFFINE: tl.constexpr):
    c = tl.program_id(0).to(tl.int64)  # (64-bit offsets: tensors past 2^31 elements)
    offs_m, mm, x, xs, scale = _inputs(x_ptr, sc_ptr, sh_ptr, c, M, a, ACC, A, BM, HAS_AFFINE)
    s = tl.full((BM, H), 0.0, ACC)
    for l in range(n):
        s = _layer(xs, s, w_in_ptr, b_ptr, w_rec_ptr, m_ptr, c, l, n, ACC, A, H, ACT)
    offs_h = tl.arange(0, H)
    tl.store(y_ptr + (c * M + offs_m)[:, None] * h_out + offs_h[None, :], s,
             mask=mm[:, None] & (offs_h < h_out)[None, :])


@triton.jit
def _ncp_bwd_kernel(x_ptr, sc_ptr, sh_ptr, w_in_ptr, b_ptr, w_rec_ptr, m_ptr, gy_ptr, s_ptr, gx_ptr, gw_in_ptr,
                    gb_ptr, gw_rec_ptr, gsc_ptr, gsh_ptr, M, a, n, h_out, n_cells, rows, slots,
                    ACC: tl.constexpr, A: tl.constexpr, H: tl.constexpr, BM: tl.constexpr, ACT: tl.constexpr,
                    HAS_AFFINE: tl.constexpr):
    c = tl.program_id(0).to(tl.int64)
    offs_m, mm, x, xs, scale = _inputs(x_ptr, sc_ptr, sh_ptr, c, M, a, ACC, A, BM, HAS_AFFINE)
    offs_a = tl.arange(0, A)
    offs_h = tl.arange(0, H)
    # the layer outputs, recomputed into this program's rows of the scratch (n, C, rows, H)
    srow = (c * rows + offs_m)[:, None] * H + offs_h[None, :]
    layer = n_cells * rows * H
    s = tl.full((BM, H), 0.0, ACC)
    for l in range(n):
        s = _layer(xs, s, w_in_ptr, b_ptr, w_rec_ptr, m_ptr, c, l, n, ACC, A, H, ACT)
        tl.store(s_ptr + l * layer + srow, s)
    tl.debug_barrier()  # (the stores of every thread of the program are read back below, in other layouts)
    g = tl.load(gy_ptr + (c * M + offs_m)[:, None] * h_out + offs_h[None, :],
                mask=mm[:, None] & (offs_h < h_out)[None, :], other=0.0).to(ACC)
    gxs = tl.full((BM, A), 0.0, ACC)
    wa = (offs_a[:, None] * H + offs_h[None, :])
    wh = (offs_h[:, None] * H + offs_h[None, :])
    for i in range(n):
        l = n - 1 - i
        w_in, b, w_rec, mask = _weights(w_in_ptr, b_ptr, w_rec_ptr, m_ptr, c, l, n, ACC, A, H)
        s = tl.load(s_ptr + l * layer + srow)
        p = g * mask[None, :] * _act_grad(s, ACT)
        s_prev = tl.load(s_ptr + tl.maximum(l - 1, 0) * layer + srow) * tl.where(l > 0, 1.0, 0.0)  # s_{-1} = 0
        cl = ((c * slots + tl.program_id(1) % slots) * n + l)  # this program's slot of the gradient buffers
        tl.atomic_add(gw_in_ptr + cl * A * H + wa, tl.dot(tl.trans(xs), p, input_precision="ieee"))
        tl.atomic_add(gb_ptr + cl * H + offs_h, common.rsum(p, 0))
        tl.atomic_add(gw_rec_ptr + cl * H * H + wh, tl.dot(tl.trans(s_prev), p, input_precision="ieee"))
        gxs += tl.dot(p, tl.trans(w_in), input_precision="ieee")
        g = tl.dot(p, tl.trans(w_rec), input_precision="ieee")
    ma = offs_a < a
    tl.store(gx_ptr + (c * M + offs_m)[:, None] * a + offs_a[None, :], gxs * scale[None, :],
             mask=mm[:, None] & ma[None, :])
    if HAS_AFFINE:
        tl.atomic_add(gsc_ptr + c * a + offs_a, common.rsum(gxs * x, 0), mask=ma)
        tl.atomic_add(gsh_ptr + c * a + offs_a, common.rsum(gxs, 0), mask=ma)


def _warps(H: int) -> int:
    """4 warps, 8 from 128 packed neurons (a layer's (H, H) recurrent weights are held in registers); unmeasured."""
    return 8 if H >= 128 else 4


def _dims(x, w_in, w_rec) -> tuple[int, ...]:
    C, M, a = x.shape
    return C, M, a, w_in.shape[1], w_in.shape[2], w_rec.shape[2]


def fwd(x, w_in, bias, w_rec, mask, in_scale, in_shift, act, h_out, block_m):
    """``y (C, M, h_out)`` in x's dtype (arguments: the packed layers, module docstring)."""
    C, M, a, n, A, H = _dims(x, w_in, w_rec)
    y = x.new_empty(C, M, h_out)
    affine = in_scale is not None
    _ncp_fwd_kernel[(C, triton.cdiv(M, block_m))](
        x, in_scale if affine else x, in_shift if affine else x, w_in, bias, w_rec, mask, y, M, a, n, h_out,
        ACC=tl.float32, A=A, H=H, BM=block_m, ACT=act, HAS_AFFINE=affine, num_warps=_warps(H))
    return y


GRAD_SLOTS = 16  # copies of the weight-gradient buffers (unmeasured: no GPU run yet)


def bwd(x, w_in, bias, w_rec, mask, in_scale, in_shift, gy, act, block_m):
    """``(gx like x, gw_in, gbias, gw_rec like the packed layers, g_in_scale, g_in_shift (C, a) or empty)``, all but
    gx in float32."""
    C, M, a, n, A, H = _dims(x, w_in, w_rec)
    blocks = triton.cdiv(M, block_m)
    slots = min(blocks, GRAD_SLOTS)
    f32 = dict(dtype=torch.float32, device=x.device)
    scratch = torch.empty(n, C, blocks * block_m, H, **f32)
    gx = torch.empty_like(x)
    gw_in, gb, gw_rec = (torch.zeros(C, slots, *t.shape[1:], **f32) for t in (w_in, bias, w_rec))
    affine = in_scale is not None
    gsc, gsh = (torch.zeros(C, a, **f32) for _ in range(2)) if affine else (x.new_empty(0, dtype=torch.float32),
                                                                            x.new_empty(0, dtype=torch.float32))
    _ncp_bwd_kernel[(C, blocks)](
        x, in_scale if affine else x, in_shift if affine else x, w_in, bias, w_rec, mask, gy, scratch, gx, gw_in,
        gb, gw_rec, gsc if affine else gx, gsh if affine else gx, M, a, n, gy.shape[2], C, blocks * block_m, slots,
        ACC=tl.float32, A=A, H=H, BM=block_m, ACT=act, HAS_AFFINE=affine, num_warps=_warps(H))
    return gx, gw_in.sum(1), gb.sum(1), gw_rec.sum(1), gsc, gsh
