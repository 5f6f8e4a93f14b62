"""One outer block of the pure-PyTorch selective scan as a plain time loop (the CPU path of ``chunked``).

On CPU, with enough parallel recurrences per step (``chunked.SEQUENTIAL_WIDTH``), an ``L``-step loop of
vectorised ``(batch, d, n)`` updates is cheaper than the chunk closed form, and it allows the block to be written
with few full-size ``(L, batch, d, n)`` tensors, each reused in place (every fresh 16 MB tensor costs page faults
that were a third of this path's time):

* forward: ``a = exp(dt A)`` (one buffer), ``h`` built in the buffer of the injected input ``dt u B`` by
  ``h_t += a_t h_{t-1}``; ``y = C . h`` as a batched matmul (no product tensor);
* backward: the forward's two buffers again, the adjoint ``lam_t = C_t gy_t + a_{t+1} lam_{t+1}`` in the buffer of
  ``C gy``, then ``dL/d(dt A) = lam a h_{t-1}`` in place of ``a``; the ``B`` / ``C`` gradients and ``lam . B`` are
  batched matmuls over the channels or states.

Layout: time-major ``(L, batch, d)`` and ``(L, batch, d, n)``; input-dependent ``B, C`` as ``(L, batch, G, n)``
(channel ``i`` uses group ``i // (d / G)``), fixed ones ``(d, n)``. The caller transposes ``dt`` and ``u`` to
time-major once for the whole sequence (:func:`time_major`) and keeps them for the backward: they are
``(batch, d, L)``-sized, and the transposing copies cost as much as two full-size passes per block.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


def time_major(v: Tensor) -> Tensor:
    """``(b, d, L)`` -> contiguous ``(L, b, d)``."""
    return v.permute(2, 0, 1).contiguous()


def step_sizes(delta: Tensor, bias: Tensor | None, softplus: bool) -> tuple[Tensor, Tensor]:
    """``(raw, dt)`` time-major: ``raw = delta + bias``, ``dt = softplus(raw)`` (or ``raw``)."""
    raw = time_major(delta) if bias is None else delta.permute(2, 0, 1) + bias
    return raw, (F.softplus(raw) if softplus else raw)


class Workspace:
    """Full-size ``(block, b, d, n)`` buffers allocated once per call and reused by every block: a fresh 16 MB
    tensor per block and step of the computation cost as much in page faults as the arithmetic on it."""

    def __init__(self, shape: tuple[int, ...], like: Tensor):
        self.shape, self.like, self.bufs = shape, like, {}

    def get(self, name: str, steps: int) -> Tensor:
        if name not in self.bufs:
            self.bufs[name] = self.like.new_empty(self.shape)
        return self.bufs[name][:steps]


class SequentialBlock:
    """Block ``[s, e)`` from time-major ``dt, u (L, b, d)`` and ``B, C`` ``(d, n)`` or ``(b, G, n, L)``."""

    def __init__(self, s: int, e: int, dt: Tensor, u: Tensor, A: Tensor, B: Tensor, C: Tensor):
        self.s, self.e = s, e
        self.dt, self.u = dt[s:e], u[s:e]
        self.du = self.dt * self.u
        self.A = A
        self.B, self.C = self._coef(B), self._coef(C)

    def _coef(self, W: Tensor) -> Tensor:
        if W.dim() == 2:
            return W
        return W[..., self.s : self.e].permute(3, 0, 1, 2).contiguous()  # (Lb, b, G, n)

    def _split(self, v: Tensor, W: Tensor) -> Tensor:
        """(Lb, b, d, ...) -> (Lb, b, G, d / G, ...) for an input-dependent W with G groups."""
        G = W.shape[2]
        return v.view(v.shape[0], v.shape[1], G, v.shape[2] // G, *v.shape[3:])

    def inject(self, v: Tensor, W: Tensor, out: Tensor | None = None) -> Tensor:
        """``v (Lb, b, d)`` times the coefficient over the states -> ``(Lb, b, d, n)`` (in ``out`` if given)."""
        out = v.new_empty(*v.shape, W.shape[-1]) if out is None else out
        if W.dim() == 2:
            return torch.mul(v.unsqueeze(-1), W, out=out)
        torch.mul(self._split(v, W).unsqueeze(-1), W.unsqueeze(3), out=self._split(out, W))
        return out

    def contract_states(self, x: Tensor, W: Tensor) -> Tensor:
        """``sum_n x[..., n] W[n]``: ``(Lb, b, d, n)`` -> ``(Lb, b, d)``."""
        if W.dim() == 2:
            return (x * W).sum(-1)
        # einsum, not matmul: 4x faster here (torch.matmul ran these 2k tiny gemv's one by one)
        return torch.einsum("lbgdn,lbgn->lbgd", self._split(x, W), W).reshape(x.shape[:3])

    def contract_channels(self, v: Tensor, x: Tensor, W: Tensor) -> Tensor:
        """Gradient of the coefficient from ``sum_d v[d] x[d, n]``: ``(d, n)`` for a fixed one, else
        ``(b, G, n, Lb)``."""
        if W.dim() == 2:
            return (x * v.unsqueeze(-1)).sum((0, 1))
        g = torch.matmul(self._split(v, W).unsqueeze(-2), self._split(x, W)).squeeze(-2)  # (Lb, b, G, n)
        return g.permute(1, 2, 3, 0)

    def decay(self, out: Tensor | None = None) -> Tensor:
        """``a = exp(dt A)``, ``(Lb, b, d, n)`` (in ``out`` if given)."""
        return torch.mul(self.dt.unsqueeze(-1), self.A, out=out).exp_()

    def states(self, a: Tensor, h0: Tensor | None, out: Tensor | None = None) -> Tensor:
        """``h_t = a_t h_{t-1} + dt_t u_t B_t``, built in the input's buffer (``out`` if given)."""
        h = self.inject(self.du, self.B, out)
        if h0 is not None:
            h[0].addcmul_(a[0], h0)
        for t in range(1, h.shape[0]):
            h[t].addcmul_(a[t], h[t - 1])
        return h

    def output(self, h: Tensor, D: Tensor | None) -> Tensor:
        y = self.contract_states(h, self.C)
        return y if D is None else y + D * self.u

    def backward(
        self, a: Tensor, h: Tensor, h0: Tensor | None, gy: Tensor, g_end: Tensor | None, out: Tensor | None = None
    ):
        """Gradients of the block from ``gy (Lb, b, d)`` (after the z gate) and the gradient ``g_end`` of its last
        state. Overwrites ``a``; the adjoint goes to ``out`` if given. Returns ``(g_delta_raw, g_u_scan, gA, gB, gC,
        g_start)`` with ``g_start`` the gradient of the state entering the block."""
        lam = self.inject(gy, self.C, out)
        if g_end is not None:
            lam[-1] += g_end
        for t in range(lam.shape[0] - 2, -1, -1):
            lam[t].addcmul_(a[t + 1], lam[t + 1])
        g_start = a[0] * lam[0]
        lamB = self.contract_states(lam, self.B)
        gB = self.contract_channels(self.du, lam, self.B)
        gC = self.contract_channels(gy, h, self.C)
        gla = a.mul_(lam)  # dL/d(dt A) = lam a h_{t-1}, in place of a
        gla[1:].mul_(h[:-1])
        if h0 is not None:
            gla[0].mul_(h0)
        else:
            gla[0].zero_()
        gdt = torch.empty_like(lamB)  # sum_n gla A, a time chunk at a time: no second full-size buffer
        for t0 in range(0, gla.shape[0], 128):
            torch.sum(gla[t0 : t0 + 128] * self.A, -1, out=gdt[t0 : t0 + 128])
        gdt.addcmul_(lamB, self.u)
        gA = gla.mul_(self.dt.unsqueeze(-1)).sum((0, 1))
        return gdt, lamB * self.dt, gA, gB, gC, g_start
