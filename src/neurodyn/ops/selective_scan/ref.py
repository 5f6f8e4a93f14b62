"""The selective scan's reference: the recurrence of :mod:`neurodyn.ops.selective_scan.interface` as a plain loop over
the steps (the tests' oracle; ``selective_scan(backend="ref")``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .checks import check_selective_scan_args, compute_dtype

__all__ = ["selective_scan_ref"]


def selective_scan_ref(
    u,
    delta,
    A,
    B,
    C,
    D=None,
    z=None,
    delta_bias=None,
    delta_softplus=False,
    return_last_state=False,
    reverse=False,
    initial_state=None,
):
    """The recurrence of :mod:`neurodyn.ops.selective_scan.interface` as a plain loop over L (the oracle of the tests).

    Differentiable by autograd; slow (O(L) Python steps). Same arguments and results as
    :func:`selective_scan`.
    """
    B, C = check_selective_scan_args(u, delta, A, B, C, D, z, delta_bias, initial_state)
    cdt = compute_dtype(u, delta, A, B, C, D, z, delta_bias, initial_state)
    batch, dim, L = u.shape
    n = A.shape[1]
    uf, dt, Af = u.to(cdt), delta.to(cdt), A.to(cdt)
    if delta_bias is not None:
        dt = dt + delta_bias.to(cdt)[:, None]
    if delta_softplus:
        dt = F.softplus(dt)

    def coef(W, t):  # (batch, d, n) at step t
        W = W.to(cdt)
        if W.dim() == 2:
            return W.expand(batch, dim, n)
        return W[..., t].repeat_interleave(dim // W.shape[1], dim=1)

    h = initial_state.to(cdt) if initial_state is not None else u.new_zeros(batch, dim, n, dtype=cdt)
    ys = [None] * L
    for t in range(L - 1, -1, -1) if reverse else range(L):
        dA = torch.exp(dt[:, :, t, None] * Af)
        h = dA * h + (dt[:, :, t] * uf[:, :, t])[:, :, None] * coef(B, t)
        ys[t] = (h * coef(C, t)).sum(-1)
    y = torch.stack(ys, dim=-1) if L else uf.clone()
    if D is not None:
        y = y + D.to(cdt)[:, None] * uf
    if z is not None:
        y = y * F.silu(z.to(cdt))
    out = y.to(u.dtype)
    return (out, h) if return_last_state else out
