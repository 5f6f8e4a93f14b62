"""NAC's NCP backbone with batched matmuls and autograd (any device): the reference of the fused kernels and
``ncp_mlp(backend="torch")`` (the layers, synapse patterns, input affine and head of
:mod:`neurodyn.ops.ncp_mlp.interface`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

Tensor = torch.Tensor

__all__ = ["ncp_mlp_ref"]

_REF_ACTS = {"linear": lambda v: v, "tanh": torch.tanh, "relu": torch.relu, "sigmoid": torch.sigmoid}


def ncp_mlp_ref(
    x: Tensor,
    w_in: Sequence[Tensor | None],
    bias: Sequence[Tensor],
    w_rec: Sequence[Tensor | None],
    mask: Sequence[Tensor],
    activation: str = "tanh",
    pattern_in: Sequence[Tensor | None] | None = None,
    pattern_rec: Sequence[Tensor | None] | None = None,
    in_scale: Tensor | None = None,
    in_shift: Tensor | None = None,
    head: tuple[Tensor, Tensor] | None = None,
):
    """The layers of :mod:`neurodyn.ops.ncp_mlp.interface` with batched matmuls (any device, plain autograd);
    ``(y, head output)`` when ``head`` is given."""
    if head is not None:
        return (
            ncp_mlp_ref(x, w_in, bias, w_rec, mask, activation, pattern_in, pattern_rec, in_scale, in_shift),
            torch.baddbmm(head[1][:, None, :], x, head[0]),
        )
    if in_scale is not None:
        x = x * in_scale[:, None, :] + in_shift[:, None, :]
    act = _REF_ACTS[activation]
    if pattern_in is not None:
        w_in = [w if w is None or p is None else w * p.to(w.dtype) for w, p in zip(w_in, pattern_in)]
    if pattern_rec is not None:
        w_rec = [w if w is None or p is None else w * p.to(w.dtype) for w, p in zip(w_rec, pattern_rec)]
    s = None
    for l, (wi, b, wr, m) in enumerate(zip(w_in, bias, w_rec, mask)):
        pre = b[:, None, :].expand(x.shape[0], x.shape[1], b.shape[-1])
        if wi is not None:
            pre = torch.baddbmm(pre, x, wi)
        if l > 0:
            pre = torch.baddbmm(pre, s, wr)
        s = act(pre) * m
    return s
