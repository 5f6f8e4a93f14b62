"""Pure-PyTorch chunked scans with hand-written backward passes (any device).

Two levels of chunking:

* **inner chunks** of length ``T`` (``chunk_scan``): the recurrence ``h_t = a_t h_{t-1} + x_t`` is run
  with a zero initial state inside every chunk at once (a ``T``-step loop vectorised over all chunks),
  the chunk-final states are carried from chunk to chunk, and the carried state enters every position
  in closed form, ``h_t = h_t^local + exp(cs_t) h_in`` with ``cs_t`` the within-chunk cumulative sum of
  ``log a`` (always ``<= 0``: no cumprod-then-divide, nothing overflows). Python steps: ``T + L/T``.
  On CPU with many parallel recurrences (``_sequential``) the chunk is the whole block: a plain loop of
  vectorised steps, without the closed form's extra passes; the selective scan then runs its blocks as
  ``sequential.SequentialBlock`` (few full-size buffers, reused in place; contractions as matmuls).
* **outer blocks** of the sequence (``SelectiveScanChunked``): the selective scan is evaluated one block
  of ``block`` steps at a time, so only ``(batch, d, block, n)`` intermediates exist at once. The
  forward keeps the state at each block boundary; the backward replays one block at a time from those
  states and runs the adjoint recurrence ``lam_t = C_t gy_t + a_{t+1} lam_{t+1}`` backwards.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .sequential import SequentialBlock, Workspace, step_sizes, time_major

Tensor = torch.Tensor


SEQUENTIAL_WIDTH = 2048


def _sequential(width: int, device: torch.device | None) -> bool:
    """Whether ``width`` parallel recurrences run as a plain time loop: on CPU with at least ``SEQUENTIAL_WIDTH``
    of them every step is a vectorised op over the width, and the chunk closed form's cumulative log-decay, its
    exponential and the correction pass, about a third of the work, disappear. GPUs (a kernel launch per step)
    and narrow problems keep about ``sqrt(L)``-step chunks."""
    return device is not None and device.type == "cpu" and width >= SEQUENTIAL_WIDTH


def _inner_chunk(L: int, width: int = 0, device: torch.device | None = None) -> int:
    """Inner chunk length for ``L`` steps of ``width`` parallel recurrences: ``L`` when :func:`_sequential`, else
    about ``sqrt(L)``."""
    if _sequential(width, device):
        return max(1, L)
    return int(min(256, max(8, 2 ** round(math.log2(max(L, 1)) / 2))))


# ---------------------------------------------------------------------------------------------
# scans in the "time-major inside chunks" layout (T, P, nc, Q): position k*T + t of the sequence is
# [t, :, k, :], so every step of the within-chunk loop touches one contiguous slice.


def _cumsum0(x: Tensor) -> Tensor:
    """``torch.cumsum(x, 0)`` as ``T - 1`` adds of contiguous slices: torch's cumsum along a leading
    dimension walks the tensor with a large stride and was the largest cost of this scan on CPU."""
    out = torch.empty_like(x)
    out[0] = x[0]
    for t in range(1, x.shape[0]):
        torch.add(out[t - 1], x[t], out=out[t])
    return out


def _tm_forward(a: Tensor, x: Tensor, log_a: Tensor | None, h0: Tensor | None) -> Tensor:
    """``h = a * h_prev + x`` over positions ``k*T + t``; ``h0`` (P, Q) enters before position 0."""
    T, nc = x.shape[0], x.shape[2]
    h = torch.empty_like(x)
    if nc == 1 and h0 is not None:  # one chunk: the state enters the loop directly
        torch.addcmul(x[0], a[0], h0[:, None], out=h[0])
    else:
        h[0] = x[0]
    for t in range(1, T):
        torch.addcmul(x[t], a[t], h[t - 1], out=h[t])
    if nc > 1:
        # decay from each chunk's start to t (inclusive): exp of a cumulative sum of log a <= 0
        decay = _cumsum0(log_a).exp_() if log_a is not None else torch.cumprod(a, 0)
        carry = torch.empty_like(x[0])  # (P, nc, Q): state entering chunk k
        state = h0 if h0 is not None else torch.zeros_like(x[0, :, 0])
        for k in range(nc):
            carry[:, k] = state
            state = torch.addcmul(h[T - 1, :, k], decay[T - 1, :, k], state)
        h.addcmul_(decay, carry)
    return h


def _tm_reverse(a: Tensor, q: Tensor, log_a: Tensor | None, g_end: Tensor | None):
    """Adjoint ``lam_t = q_t + a_{t+1} lam_{t+1}`` (``g_end`` added at the last position).

    Returns ``(lam, a_0 lam_0)``; the second is the gradient that flows into the state before
    position 0.
    """
    T, nc = q.shape[0], q.shape[2]
    lam = torch.empty_like(q)
    if nc == 1 and g_end is not None:  # one chunk: the gradient from after the end enters the loop directly
        torch.add(q[T - 1], g_end[:, None], out=lam[T - 1])
    else:
        lam[T - 1] = q[T - 1]
    for t in range(T - 2, -1, -1):
        torch.addcmul(q[t], a[t + 1], lam[t + 1], out=lam[t])
    if nc == 1:
        return lam, a[0, :, 0] * lam[0, :, 0]
    # decay from t (exclusive) to the chunk's end: exp(cs_end - cs_t) with cs_end - cs_t <= 0
    if log_a is not None:
        cs = _cumsum0(log_a)
        to_end = torch.sub(cs[T - 1 :], cs).exp_()
    else:
        to_end = torch.cat([torch.cumprod(a[1:].flip(0), 0).flip(0), torch.ones_like(a[:1])], 0)
    state = g_end if g_end is not None else torch.zeros_like(q[0, :, 0])
    carry = torch.empty_like(q[0])
    for k in range(nc - 1, -1, -1):
        carry[:, k] = state
        state = a[0, :, k] * torch.addcmul(lam[0, :, k], to_end[0, :, k], state)
    lam.addcmul_(to_end, carry)
    return lam, state


def _to_tm(t: Tensor, T: int) -> Tensor:
    """(..., nc*T) -> (T, ..., nc) contiguous."""
    return t.reshape(*t.shape[:-1], -1, T).movedim(-1, 0).contiguous()


def _from_tm(t: Tensor) -> Tensor:
    """(T, ..., nc) -> (..., nc*T)."""
    return t.movedim(0, -1).reshape(*t.shape[1:-1], -1)


def chunk_scan(a: Tensor, x: Tensor, h0: Tensor | None = None, log_a: Tensor | None = None) -> Tensor:
    """``h_t = a_t * h_{t-1} + x_t`` along dim 1 of ``(P, L, Q)`` tensors, ``h_{-1} = h0`` (``(P, Q)``).

    ``a`` must be in [0, 1] (decays); if ``log_a`` is given it is used for the closed-form part, which
    avoids a product of ``a`` values. No autograd: callers provide their own backward.
    """
    P, L, Q = x.shape
    T = _inner_chunk(L, P * Q, x.device)
    nc = -(-L // T)
    pad = nc * T - L
    tm = lambda v, fill: _to_tm(F.pad(v, (0, 0, 0, pad), value=fill).transpose(1, 2), T).transpose(2, 3).contiguous()  # noqa: E731
    h = _tm_forward(tm(a, 1.0), tm(x, 0.0), None if log_a is None else tm(log_a, 0.0), h0)
    return _from_tm(h.transpose(2, 3)).transpose(1, 2)[:, :L]


# ---------------------------------------------------------------------------------------------
# the selective scan


class _Coef:
    """An input-dependent (b, G, n, L) or fixed (d, n) B/C matrix in the time-major block layout."""

    def __init__(self, W: Tensor):
        self.W = W
        self.var = W.dim() == 4
        self.groups = W.shape[1] if self.var else 1

    def block(self, s: int, e: int, pad: int, T: int) -> Tensor:
        """(T, b, G, 1, nc, n) for input-dependent, (1, 1, d, 1, n) for fixed."""
        if not self.var:
            return self.W[None, None, :, None, :]
        Wb = F.pad(self.W[..., s:e], (0, pad))  # (b, G, n, Lb)
        return _to_tm(Wb, T).movedim(3, -1).unsqueeze(3).contiguous()

    def mul(self, x: Tensor, Wb: Tensor) -> Tensor:
        """x (T, b, d, nc, n or 1) times the coefficient -> (T, b, d, nc, n)."""
        if not self.var:
            return x * Wb
        T, b, d, nc, m = x.shape
        return (x.view(T, b, self.groups, d // self.groups, nc, m) * Wb).view(T, b, d, nc, -1)

    def reduce(self, g: Tensor, L: int) -> Tensor:
        """Gradient (T, b, d, nc, n) of the per-channel product -> gradient of the coefficient block."""
        if not self.var:
            return g.sum(dim=(0, 1, 3))
        T, b, d, nc, n = g.shape
        gs = g.view(T, b, self.groups, d // self.groups, nc, n).sum(3)  # (T, b, G, nc, n)
        return _from_tm(gs.movedim(-1, 3))[..., :L]  # (b, G, n, L)


class _Block:
    """One outer block [s, e) of the sequence in the time-major layout, padded to nc * T steps."""

    def __init__(self, s, e, u, delta, A, bias, softplus):
        self.s, self.e, self.L = s, e, e - s
        self.T = _inner_chunk(self.L)
        nc = -(-self.L // self.T)
        self.pad = nc * self.T - self.L
        tm = lambda v: _to_tm(F.pad(v[..., s:e], (0, self.pad)), self.T)  # noqa: E731
        self.raw = tm(delta) if bias is None else tm(delta) + bias[None, None, :, None]  # (T, b, d, nc)
        dt = F.softplus(self.raw) if softplus else self.raw
        if self.pad:  # padded steps: dt = 0, so a = 1 and nothing is injected
            dt = dt * _to_tm(F.pad(torch.ones_like(u[:1, :1, s:e]), (0, self.pad)), self.T)
        self.dt, self.u = dt, tm(u)
        self.la = dt.unsqueeze(-1) * A[None, None, :, None, :]  # (T, b, d, nc, n), <= 0 for A <= 0
        self.a = self.la.exp()
        self.du = (dt * self.u).unsqueeze(-1)

    def states(self, Bc: _Coef, Bb: Tensor, h_in: Tensor | None):
        x = Bc.mul(self.du, Bb)
        T, b, d, nc, n = x.shape
        flat = lambda v: v.view(T, b * d, nc, n)  # noqa: E731
        h = _tm_forward(flat(self.a), flat(x), flat(self.la), None if h_in is None else h_in.reshape(b * d, n))
        return x, h.view_as(x)

    def output(self, Cc: _Coef, Cb: Tensor, h: Tensor, D: Tensor | None) -> Tensor:
        y = Cc.mul(h, Cb).sum(-1)  # (T, b, d, nc)
        if D is not None:
            y = y + D[None, None, :, None] * self.u
        return y


def _add_coef_grad(total: Tensor, g: Tensor, var: bool, s: int, e: int) -> None:
    """A block's B or C gradient: its time slice of an input-dependent one, added to a fixed one."""
    if var:
        total[..., s:e] = g
    else:
        total += g


def _softplus_grad(raw: Tensor) -> Tensor:
    """d softplus / d raw, with torch's threshold (identity above 20)."""
    return torch.where(raw > 20, torch.ones_like(raw), torch.sigmoid(raw))


class SelectiveScanChunked(torch.autograd.Function):
    """Selective scan by outer blocks + inner chunks; see the module docstring.

    Inputs are already validated and in the compute dtype: u, delta, z (b, d, L); A (d, n);
    B, C (d, n) or (b, G, n, L); D, bias (d,); h0 (b, d, n). Returns (out (b, d, L), last (b, d, n)).
    """

    @staticmethod
    def forward(ctx, u, delta, A, B, C, D, z, bias, h0, softplus: bool, block: int):
        b, d, L = u.shape
        n = A.shape[1]
        Bc, Cc = _Coef(B), _Coef(C)
        out = torch.empty_like(u)
        state = h0
        saved_states = []
        sequential = _sequential(b * d * n, u.device)
        if sequential:  # time-major dt, u (and the ungated output) for the whole sequence, kept for the backward
            raw, dt_tm = step_sizes(delta, bias, softplus)
            u_tm = time_major(u)
            y_tm = torch.empty_like(u_tm)
            ws = Workspace((min(block, L), b, d, n), u)
        for s in range(0, L, block):
            e = min(L, s + block)
            saved_states.append(state)
            if sequential:
                sb = SequentialBlock(s, e, dt_tm, u_tm, A, B, C)
                h = sb.states(sb.decay(ws.get("a", e - s)), state, ws.get("h", e - s))
                y_tm[s:e] = sb.output(h, D)
                state = h[-1].clone()
                continue
            blk = _Block(s, e, u, delta, A, bias, softplus)
            _, h = blk.states(Bc, Bc.block(s, e, blk.pad, blk.T), state)
            y = _from_tm(blk.output(Cc, Cc.block(s, e, blk.pad, blk.T), h, D))[..., : e - s]
            out[..., s:e] = y * F.silu(z[..., s:e]) if z is not None else y
            last_t = (e - s - 1) % blk.T  # last real step: chunk nc-1 (padding sits after it)
            state = h[last_t, :, :, -1]
        last = state if state is not None else torch.zeros(b, d, n, dtype=u.dtype, device=u.device)
        seq_saved = ()
        if sequential:
            y = y_tm.permute(1, 2, 0)
            out.copy_(y * F.silu(z) if z is not None else y)
            seq_saved = (raw, dt_tm, u_tm, y_tm if z is not None else torch.empty(0))
        ctx.softplus, ctx.block, ctx.sequential = softplus, block, sequential
        ctx.has = (D is not None, z is not None, bias is not None, h0 is not None)
        keep = [t if t is not None else torch.empty(0) for t in (D, z, bias, h0)]
        bstates = torch.stack([torch.zeros_like(last) if st is None else st for st in saved_states], 0)
        ctx.save_for_backward(u, delta, A, B, C, bstates, *keep, *seq_saved)
        return out, last

    @staticmethod
    def backward(ctx, gout, glast):
        u, delta, A, B, C, bstates, D, z, bias, h0, *seq_saved = ctx.saved_tensors
        hasD, hasz, hasbias, hash0 = ctx.has
        D, z, bias, h0 = (t if h else None for t, h in zip((D, z, bias, h0), ctx.has))
        b, d, L = u.shape
        n = A.shape[1]
        if gout is None:
            gout = torch.zeros_like(u)
        g = _Grads(u, A, B, C, hasD, hasz)
        g_end = None if glast is None else glast.reshape(b * d, n)
        starts = list(range(0, L, ctx.block))
        if ctx.sequential:
            g_end = _backward_sequential(ctx, g, gout, seq_saved, bstates, starts, g_end, A, B, C, D, z)
        else:
            Bc, Cc = _Coef(B), _Coef(C)
            for i in reversed(range(len(starts))):
                s = starts[i]
                blk = _Block(s, min(L, s + ctx.block), u, delta, A, bias, ctx.softplus)
                h_in = bstates[i] if (i > 0 or hash0) else None
                g_end = _backward_block(blk, g, gout, g_end, h_in, A, D, z, Bc, Cc, ctx.softplus)
        gbias = g.delta.sum(dim=(0, 2)) if hasbias else None
        gh0 = g_end.view(b, d, n) if hash0 else None
        return g.u, g.delta, g.A, g.B, g.C, g.D, g.z, gbias, gh0, None, None


class _Grads:
    """The gradients :meth:`SelectiveScanChunked.backward` fills block by block (``D`` / ``z``: None when absent)."""

    def __init__(self, u: Tensor, A: Tensor, B: Tensor, C: Tensor, hasD: bool, hasz: bool):
        self.u, self.delta = torch.empty_like(u), torch.empty_like(u)
        self.z = torch.empty_like(u) if hasz else None
        self.A, self.B, self.C = torch.zeros_like(A), torch.zeros_like(B), torch.zeros_like(C)
        self.D = torch.zeros(u.shape[1], dtype=u.dtype, device=u.device) if hasD else None


def _backward_block(
    blk: _Block,
    g: _Grads,
    gout: Tensor,
    g_end: Tensor | None,
    h_in: Tensor | None,
    A: Tensor,
    D: Tensor | None,
    z: Tensor | None,
    Bc: _Coef,
    Cc: _Coef,
    softplus: bool,
) -> Tensor:
    """One outer block of the chunked path, backwards: its states recomputed from ``h_in``, the adjoint scanned back
    from ``g_end`` (the gradient reaching its last state); fills ``g`` and returns the gradient at its first state."""
    s, e, T, pad = blk.s, blk.e, blk.T, blk.pad
    b, d = gout.shape[:2]
    n = A.shape[1]
    Bb, Cb = Bc.block(s, e, pad, T), Cc.block(s, e, pad, T)
    x, h = blk.states(Bc, Bb, h_in)
    gy = _to_tm(F.pad(gout[..., s:e], (0, pad)), T)  # (T, b, d, nc)
    if z is not None:
        zt = _to_tm(F.pad(z[..., s:e], (0, pad)), T)
        y = blk.output(Cc, Cb, h, D)
        sz = torch.sigmoid(zt)
        g.z[..., s:e] = _from_tm(gy * y * sz * (1 + zt * (1 - sz)))[..., : e - s]
        gy = gy * zt * sz
    if D is not None:
        g.D += (gy * blk.u).sum(dim=(0, 1, 3))
    q = Cc.mul(gy.unsqueeze(-1), Cb)
    _, _, _, nc, _ = q.shape
    flat = lambda v: v.view(T, b * d, nc, n)  # noqa: E731
    lam, g_start = _tm_reverse(flat(blk.a), flat(q), flat(blk.la), g_end)
    lam = lam.view_as(q)
    gla = lam * (h - x)  # dL/d(dt A): a_t h_{t-1} = h_t - x_t
    g.A += (gla * blk.dt.unsqueeze(-1)).sum(dim=(0, 1, 3))
    lamB = Bc.mul(lam, Bb).sum(-1)  # (T, b, d, nc)
    gdt = (gla * A[None, None, :, None, :]).sum(-1) + lamB * blk.u
    if softplus:
        gdt = gdt * _softplus_grad(blk.raw)
    g.delta[..., s:e] = _from_tm(gdt)[..., : e - s]
    gu_t = lamB * blk.dt + (gy * D[None, None, :, None] if D is not None else 0)
    g.u[..., s:e] = _from_tm(gu_t)[..., : e - s]
    _add_coef_grad(g.B, Bc.reduce(lam * blk.du, e - s), Bc.var, s, e)
    _add_coef_grad(g.C, Cc.reduce(gy.unsqueeze(-1) * h, e - s), Cc.var, s, e)
    return g_start


def _backward_sequential(
    ctx,
    g: _Grads,
    gout: Tensor,
    seq_saved,
    bstates: Tensor,
    starts: list[int],
    g_end: Tensor | None,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    D: Tensor | None,
    z: Tensor | None,
) -> Tensor | None:
    """The sequential CPU path backwards, block by block in time-major layout from the saved forward (the raw and
    softplus'd steps, the inputs, the ungated output); fills ``g`` and returns the gradient at the first state."""
    raw, dt_tm, u_tm, y_tm = seq_saved
    L, b, d = u_tm.shape
    n = A.shape[1]
    hash0 = ctx.has[3]
    Bc, Cc = _Coef(B), _Coef(C)
    gout_tm = time_major(gout)
    if z is not None:  # the gate: gz from the saved ungated output, the gradient reaching y
        z_tm = time_major(z)
        sz = torch.sigmoid(z_tm)
        g.z.copy_((gout_tm * y_tm * sz * (1 + z_tm * (1 - sz))).permute(1, 2, 0))
        gout_tm = gout_tm * z_tm * sz
    gdelta_tm, gu_tm = torch.empty_like(u_tm), torch.empty_like(u_tm)
    ws = Workspace((min(ctx.block, L), b, d, n), u_tm)
    for i in reversed(range(len(starts))):
        s = starts[i]
        e = min(L, s + ctx.block)
        h_in = bstates[i] if (i > 0 or hash0) else None
        sb = SequentialBlock(s, e, dt_tm, u_tm, A, B, C)
        a = sb.decay(ws.get("a", e - s))
        h = sb.states(a, h_in, ws.get("h", e - s))
        gy = gout_tm[s:e]
        if D is not None:
            g.D += (gy * sb.u).sum((0, 1))
        gdelta_tm[s:e], gu_tm[s:e], gA_b, gB_b, gC_b, g_start = sb.backward(
            a, h, h_in, gy, None if g_end is None else g_end.view(b, d, n), ws.get("lam", e - s)
        )
        g.A += gA_b
        _add_coef_grad(g.B, gB_b, Bc.var, s, e)
        _add_coef_grad(g.C, gC_b, Cc.var, s, e)
        g_end = g_start.reshape(b * d, n)
    if D is not None:
        gu_tm.addcmul_(gout_tm, D)
    if ctx.softplus:
        gdelta_tm.mul_(_softplus_grad(raw))
    g.delta.copy_(gdelta_tm.permute(1, 2, 0))
    g.u.copy_(gu_tm.permute(1, 2, 0))
    return g_end


def default_block(b: int, d: int, n: int, L: int, device: torch.device | None = None) -> int:
    """Outer block length, a multiple of 64, at most L: about 4M state elements per block for the chunked path,
    1M for the sequential CPU path, whose three block buffers then stay in cache (forward + backward at b 2, d 128,
    n 16, L 4096: blocks of 128 / 256 / 1024 steps 176 / 201 / 226 ms)."""
    width = max(1, b * d * n)
    budget = 1 << 20 if _sequential(width, device) else 1 << 22
    blk = max(64, budget // width)
    blk = (blk // 64) * 64
    return max(1, min(L, blk))
