"""NAC's NCP backbone on its Triton kernels (``triton_kernels.py``) as operators, the packed layers they read, their
tiles, and the call the public function makes.

``torch.ops.neurodyn.ncp_mlp_triton(x, w_in, bias, w_rec, mask, in_scale?, in_shift?, widths, inputs, act, h_out,
block_m) -> y`` and ``ncp_mlp_triton_bwd`` (:func:`neurodyn.ops.custom_op.define_op`): the backbone on its packed
layers (:func:`pack_layers`), each at its own width; the backward recomputes the layer outputs (the forward saves
only its inputs).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import triton_loader
from ..custom_op import contiguous, define_op
from ..triton_loader import ceil_pow2

Tensor = torch.Tensor

__all__ = ["NCP_BLOCK_M", "ncp_blocks", "ncp_mlp_triton", "pack_layers", "packed_input_width", "packed_width"]

NCP_BLOCK_M = 128  # rows per program at most: 16 per warp (an MMA tile's height), up to 8 warps


def ncp_blocks(M: int, H: int) -> int:
    """Rows per program of the NCP kernels for ``M`` rows (``H``, the packed widths' sum, kept for the tile policy):
    a power of two from 16 (one warp) to ``NCP_BLOCK_M`` (the kernels run a warp per 16 rows; the weights a program
    reads from L2 are shared by its rows)."""
    return max(16, min(NCP_BLOCK_M, ceil_pow2(M)))


def packed_width(k: int) -> int:
    """A packed layer width: the next multiple of 16 (the Triton kernels' chunk of neurons, ``tl.dot``'s smallest)."""
    return max(16, -(-int(k) // 16) * 16)


def packed_input_width(a: int) -> int:
    """The packed input width: the next power of two, at least 16."""
    return max(16, ceil_pow2(a))


def pack_layers(x: Tensor, w_in, bias, w_rec, mask, pattern_in=None, pattern_rec=None):
    """The layers as the Triton kernels read them, each layer at its own width: ``(w_in (C, sum_l A H_l), bias (C,
    sum_l H_l), w_rec (C, sum_{l>=1} H_{l-1} H_l), mask (sum_l H_l,), widths, inputs, h_out)`` in float32.

    Layer ``l`` is zero-padded to ``H_l = packed_width(h_l)`` neurons (a multiple of 16) and the input to ``A =
    packed_input_width(a)`` features (a power of two, at least 16); each
    cell's weights are flattened layer after layer (``(A, H_l)`` input blocks of the layers in ``inputs``, the layers
    with an input term; ``(H_{l-1}, H_l)`` recurrent blocks from layer 1 on), the patterns applied (``W *
    pattern``). Differentiable (padding and concatenation): the gradients of the packed tensors flow back to the
    listed weights."""
    C, _, a = x.shape
    n = len(bias)
    widths = [packed_width(b.shape[-1]) for b in bias]
    inputs = [int(w is not None) for w in w_in]
    A = packed_input_width(a)
    pattern_in = pattern_in or [None] * n
    pattern_rec = pattern_rec or [None] * n

    def pad(w, pattern, rows, cols):
        w = w.float() if pattern is None else w.float() * pattern.float()
        return F.pad(w, (0, cols - w.shape[-1], 0, rows - w.shape[-2])).reshape(C, -1)

    f32 = dict(dtype=torch.float32, device=x.device)
    blocks_in = [pad(w, pt, A, h) for w, pt, h in zip(w_in, pattern_in, widths) if w is not None]
    blocks_rec = [pad(w, pt, p, h) for w, pt, p, h in zip(list(w_rec)[1:], list(pattern_rec)[1:], widths, widths[1:])]
    packed_in = torch.cat(blocks_in, 1) if blocks_in else torch.zeros(C, 1, **f32)
    packed_rec = torch.cat(blocks_rec, 1) if blocks_rec else torch.zeros(C, 1, **f32)
    packed_b = torch.cat([F.pad(b.float(), (0, h - b.shape[-1])) for b, h in zip(bias, widths)], 1)
    packed_m = torch.cat([F.pad(m.detach().float(), (0, h - m.shape[-1])) for m, h in zip(mask, widths)])
    return packed_in, packed_b, packed_rec, packed_m, widths, inputs, int(bias[-1].shape[-1])


_ARGS = "Tensor x, Tensor w_in, Tensor bias, Tensor w_rec, Tensor mask, Tensor? in_scale, Tensor? in_shift"


def _bwd_fake(x, w_in, bias, w_rec, mask, in_scale, in_shift, gy, widths, inputs, act, block_m):
    new = lambda *shape: x.new_empty(*shape, dtype=torch.float32)  # noqa: E731
    io = (new(x.shape[0], x.shape[2]), new(x.shape[0], x.shape[2])) if in_scale is not None else (new(0), new(0))
    return new(*w_in.shape), new(*bias.shape), new(*w_rec.shape), *io, x.new_empty(x.shape)


ncp_mlp_triton_bwd = define_op(
    "ncp_mlp_triton_bwd",
    f"({_ARGS}, Tensor gy, int[] widths, int[] inputs, int act, int block_m) -> (Tensor gw_in, "
    "Tensor gbias, Tensor gw_rec, Tensor gin_scale, Tensor gin_shift, Tensor gx)",
    triton_loader.launcher("ncp_mlp", "bwd"),
    _bwd_fake,
    backend="triton",
)


def _fwd_fake(x, w_in, bias, w_rec, mask, in_scale, in_shift, widths, inputs, act, h_out, block_m):
    return x.new_empty(x.shape[0], x.shape[1], h_out)


def _backward(s, gy):
    gw_in, gb, gw_rec, gsc, gsh, gx = ncp_mlp_triton_bwd(
        s.x,
        s.w_in,
        s.bias,
        s.w_rec,
        s.mask,
        s.in_scale,
        s.in_shift,
        gy.contiguous(),
        s.widths,
        s.inputs,
        s.act,
        s.block_m,
    )
    like = lambda g, t: None if t is None else g.to(t.dtype)  # noqa: E731
    return {
        "x": gx,
        "w_in": like(gw_in, s.w_in),
        "bias": like(gb, s.bias),
        "w_rec": like(gw_rec, s.w_rec),
        "in_scale": like(gsc, s.in_scale),
        "in_shift": like(gsh, s.in_shift),
    }


ncp_mlp_triton_op = define_op(
    "ncp_mlp_triton",
    f"({_ARGS}, int[] widths, int[] inputs, int act, int h_out, int block_m) -> Tensor y",
    triton_loader.launcher("ncp_mlp", "fwd"),
    _fwd_fake,
    backend="triton",
    save=("x", "w_in", "bias", "w_rec", "mask", "in_scale", "in_shift"),
    backward=_backward,
)


def ncp_mlp_triton(
    x: Tensor,
    w_in: Tensor,
    bias: Tensor,
    w_rec: Tensor,
    mask: Tensor,
    widths,
    inputs,
    act: int,
    h_out: int,
    in_scale: Tensor | None = None,
    in_shift: Tensor | None = None,
) -> Tensor:
    """The NCP backbone on the Triton kernels, on packed layers (:func:`pack_layers`, each layer at its own width):
    ``x (C, M, a)``, ``w_in (C, sum A H_l)``, ``bias (C, sum H_l)``, ``w_rec (C, sum H_{l-1} H_l)``, ``mask (sum
    H_l,)``, ``widths`` the packed widths ``H_l``, ``inputs`` 0/1 per layer (an input term), optional ``in_scale,
    in_shift (C, a)``; ``act`` a code of ``ACT_CODES``. Returns ``y (C, M, h_out)`` in x's dtype (float32
    arithmetic)."""
    triton_loader.check_device(x, "ncp_mlp")
    widths, inputs = [int(w) for w in widths], [int(i) for i in inputs]
    args = [contiguous(t) for t in (x, w_in, bias, w_rec, mask, in_scale, in_shift)]
    return ncp_mlp_triton_op(*args, widths, inputs, act, h_out, ncp_blocks(x.shape[1], sum(widths)))
