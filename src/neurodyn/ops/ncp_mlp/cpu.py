"""The fused CPU NCP backbone (``csrc/ncp_cpu.cpp``) as operators, and the call the public function makes.

``torch.ops.neurodyn.ncp_mlp_fwd`` / ``ncp_mlp_bwd`` (:func:`neurodyn.ops.custom_op.define_op`): ``x (C, M, a)``;
per layer ``w_in (C, a, h)`` (empty: no input term), ``bias (C, h)``, ``w_rec (C, h_prev, h)`` (``w_rec[0]`` empty),
``mask (h,)``; the synapse patterns per layer (empty lists: dense); ``io = [in_scale, in_shift (C, a), head_w (C, a,
o), head_b (C, o)]``, each empty when unused. The forward returns every layer's outputs in tiles of ``NCP_TILE`` rows
(what the backward reads), then ``y (C, M, h_last)`` and the head's output; it carries the autograd formula, which
calls the backward operator (first order; no gradient for the masks and patterns).
"""

from __future__ import annotations

import torch

from .. import cpu_kernel
from ..custom_op import cdiv, define_op

Tensor = torch.Tensor

__all__ = ["NCP_TILE", "ncp_mlp_cpu", "ncp_mlp_fwd", "ncp_mlp_bwd"]

NCP_TILE = 16  # ncp_cpu.cpp R: rows per tile (the saved outputs' shapes)

_LAYERS = "Tensor x, Tensor[] w_in, Tensor[] bias, Tensor[] w_rec, Tensor[] mask"


def _owned(t: Tensor) -> Tensor:
    """``t`` as a contiguous tensor that is the whole of its storage: a copy when it is a view into a larger buffer, a
    new tensor of its shape when it is empty (the kernel returns one empty tensor for several unused gradients)."""
    if t.numel() == 0:
        return t.new_empty(t.shape)
    if t.is_contiguous() and t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.numel() * t.element_size():
        return t
    return t.clone(memory_format=torch.contiguous_format)


def _bwd(x, w_in, bias, w_rec, mask, saved, gout, act, pattern_in, pattern_rec, io, ghead):
    grads = cpu_kernel.library().ncp_mlp_bwd(
        x, w_in, bias, w_rec, mask, saved, gout, act, pattern_in, pattern_rec, io, ghead
    )
    # the bias and input-affine / head gradients are slices of one per-cell buffer: copied apart (weight-sized)
    return [_owned(g) for g in grads]


def _bwd_fake(x, w_in, bias, w_rec, mask, saved, gout, act, pattern_in, pattern_rec, io, ghead):
    empty = lambda: x.new_empty(0)  # noqa: E731
    like = lambda t: t.new_empty(t.shape) if t.numel() > 0 else empty()  # noqa: E731
    grads = [x.new_empty(x.shape)]
    for l, b in enumerate(bias):  # w_in: an empty tensor (of any shape) means no input term, and gets an empty grad
        grads += [like(w_in[l]), b.new_empty(b.shape), w_rec[l].new_empty(w_rec[l].shape) if l > 0 else empty()]
    return grads + [like(t) for t in io]


ncp_mlp_bwd = define_op(
    "ncp_mlp_bwd",
    f"({_LAYERS}, Tensor[] saved, Tensor gout, int act, Tensor[] pattern_in, Tensor[] pattern_rec, "
    "Tensor[] io, Tensor ghead) -> Tensor[]",
    _bwd,
    _bwd_fake,
    backend="cpp",
)


def _fwd(x, w_in, bias, w_rec, mask, act, pattern_in, pattern_rec, io):
    return cpu_kernel.library().ncp_mlp_fwd(x, w_in, bias, w_rec, mask, act, pattern_in, pattern_rec, io)


def _fwd_fake(x, w_in, bias, w_rec, mask, act, pattern_in, pattern_rec, io):
    C, M, _ = x.shape
    tiles = cdiv(M, NCP_TILE)
    saved = [x.new_empty(C, tiles, b.shape[1], NCP_TILE) for b in bias]
    head = x.new_empty(C, M, io[2].shape[-1]) if io[2].numel() > 0 else x.new_empty(0)
    return [*saved, x.new_empty(C, M, bias[-1].shape[1]), head]


def _backward(s, grads):
    n = len(s.bias)
    gout, ghead = grads[-2], grads[-1]
    if ghead is None or s.io[2].numel() == 0:
        ghead = s.x.new_empty(0)
    g = ncp_mlp_bwd(
        s.x,
        s.w_in,
        s.bias,
        s.w_rec,
        s.mask,
        s.outputs[:n],
        gout.contiguous(),
        s.act,
        s.pattern_in,
        s.pattern_rec,
        s.io,
        ghead.contiguous(),
    )
    gx, per_layer, g_io = g[0], g[1 : 3 * n + 1], g[3 * n + 1 :]
    return {
        "x": gx,
        "w_in": [per_layer[3 * l] if s.w_in[l].numel() else None for l in range(n)],
        "bias": [per_layer[3 * l + 1] for l in range(n)],
        "w_rec": [None] + [per_layer[3 * l + 2] for l in range(1, n)],
        "io": [gi if t.numel() else None for gi, t in zip(g_io, s.io)],
    }


ncp_mlp_fwd = define_op(
    "ncp_mlp_fwd",
    f"({_LAYERS}, int act, Tensor[] pattern_in, Tensor[] pattern_rec, Tensor[] io) -> Tensor[] outputs",
    _fwd,
    _fwd_fake,
    backend="cpp",
    save=("x", "w_in", "bias", "w_rec", "mask", "pattern_in", "pattern_rec", "io", "outputs"),
    backward=_backward,
)


def ncp_mlp_cpu(x, w_in, bias, w_rec, mask, act: int, pattern_in, pattern_rec, io) -> tuple[Tensor, Tensor]:
    """The backbone on the fused kernel (the operator's arguments above, prepared: one dtype, contiguous):
    ``(y, head output)``, the head's empty without a head."""
    *_, y, head = ncp_mlp_fwd(x, w_in, bias, w_rec, mask, act, pattern_in, pattern_rec, io)
    return y, head
