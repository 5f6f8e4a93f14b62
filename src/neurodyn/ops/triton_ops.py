"""The Triton kernels as PyTorch operators: ``torch.ops.neurodyn.*_triton``, each with a schema, a fake and autograd.

Defined with ``torch.library.custom_op`` at import, without importing ``triton``: an operator's implementation loads
its kernel module (:func:`neurodyn.ops.triton_loader.load`) when it first runs, on CUDA tensors compiled, on CPU
tensors in Triton's interpreter. The fakes compute every output's shape and dtype from the arguments, the block sizes
included (they are arguments of the schema, chosen by :func:`scan_blocks`), so ``torch.compile`` and
``torch.export`` trace through the operators without running them; the forward operators carry their autograd
formula (``register_autograd``), which calls the matching ``*_bwd`` operator, so an exported graph stays
differentiable. The backward operators are first order.

* ``selective_scan_triton(u, delta, A, B, C, D?, z?, delta_bias?, h0?, softplus, reverse, save_checkpoints,
  block_l, block_d, zoh) -> (out, last, ckpt)`` and ``selective_scan_triton_bwd``: the selective scan of
  :mod:`neurodyn.ops.selective_scan` with bias, softplus, D, the z gate, reverse, initial and last state in one
  kernel; ``B, C`` fixed ``(d, n)`` or ``(batch, G, n, L)``; ``zoh``: the Kirchhoff cell's exact ZOH input
  (:mod:`neurodyn.ops.knc_scan`). ``ckpt (batch, d, ceil(L / block_l), n)`` holds the state
  entering every chunk of ``block_l`` steps (empty unless ``save_checkpoints``); the backward recomputes each chunk's
  states from it.
* ``head_scan_triton(u, dt, A, B, C, D?, save_checkpoints, block_l, block_d) -> (y, ckpt)`` and
  ``head_scan_triton_bwd``: the multi-head scan of :mod:`neurodyn.ops.head_scan` on the same kernels, reading its
  time-major layout in place (strides, one step and decay per head).
* ``linear_scan_triton(a, x, h0?, reverse, block_l, block_q) -> h`` and ``linear_scan_triton_bwd``:
  ``h_t = a_t h_{t-1} + x_t`` along dim 1 of ``(P, L, Q)``.
* ``scan2d_triton(x, delta, A, B, C, D?, R, bias?, dirs, softplus, form, save_checkpoints, seg, rows, block_d,
  block_n) -> (y, ckpt, dsum)`` and ``scan2d_triton_bwd``: every direction of GeoMaNO's 2-D scan with its correction
  in one launch (direction a program axis, frames by strides, softplus and bias fused), ``y (batch, K, d, H, W)``;
  ``ckpt (batch, K, d, nseg + 1, n, BQ)`` holds the column states entering every segment of ``seg`` rows (and
  leaving the last), ``dsum`` the
  column sums of the steps over each block of ``rows`` rows (empty with one block).
* ``ncp_mlp_triton(x, w_in, bias, w_rec, mask, in_scale?, in_shift?, widths, inputs, act, h_out, block_m) -> y``
  and ``ncp_mlp_triton_bwd``: the pruned NCP backbone of :mod:`neurodyn.ops.ncp_mlp` on its packed layers, each at
  its own width; the backward recomputes the layer outputs (the forward saves only its inputs).
"""
from __future__ import annotations

import torch

from . import triton_loader

Tensor = torch.Tensor

__all__ = ["OPS", "scan_blocks", "linear_blocks", "scan2d_blocks", "ncp_blocks", "selective_scan_triton",
           "head_scan_triton", "linear_scan_triton", "scan2d_triton", "ncp_mlp_triton"]

# tile sizes. The selective-scan kernels (neurodyn.ops.selective_scan.triton_kernels) walk L in chunks of
# SCAN_BLOCK_L steps (also the checkpoint interval): 16 consecutive steps per thread in the forward, 8 in the backward,
# so a 128-step chunk spans 8 (16) lanes and a warp holds 4 (2) channels; SCAN_WARPS warps per program. Sized from
# ptxas for sm_90 (no spill, backward <= 168 registers), not from a GPU run. SCAN_BLOCK_D caps the channels per
# program (None: no cap; the tests set it to get several channel blocks at small sizes).
SCAN_BLOCK_L = 128
SCAN_WARPS = 4
SCAN_BLOCK_D = None
LINEAR_BLOCK_L = 32
LINEAR_TILE = 2048
SCAN2D_TILE = 1024       # 2-D scan: elements of a program's (channels, n_pow2, BQ) row tile (4 per thread, 8 warps)
SCAN2D_MAX_ROW = 8192    # states of one channel's row (n_pow2 x BQ) the 2-D kernels take (split in state blocks)
SCAN2D_SEG = 1           # rows per backward segment (a checkpoint every segment): ptxas for sm_90 spills the
                         # backward from 2 on at n = 16, W = 64 (4 elements per thread or 8, 4 or 8 warps)
SCAN2D_PROGRAMS = 1024   # programs wanted per launch: rows split into blocks (a carry pass) below it


def _pow2(x: int) -> int:
    return 1 << max(int(x) - 1, 0).bit_length()


def _floor_pow2(x: int) -> int:
    return 1 << (max(int(x), 1).bit_length() - 1)


def scan_blocks(dim: int, n: int, L: int) -> tuple[int, int]:
    """``(block_l, block_d)`` of the selective-scan kernels: chunks of ``block_l`` steps (a power of two, at most
    ``SCAN_BLOCK_L``, at least 4) and ``block_d`` channels per forward program, those that ``SCAN_WARPS`` warps hold
    at 16 steps per thread (at most ``SCAN_BLOCK_D``, and no more than the next power of two of ``dim``). ``n`` is
    not part of the choice: the states are a loop inside the kernels."""
    bl = max(min(SCAN_BLOCK_L, _pow2(L)), 4)
    lanes = max(bl // 16, 1)
    bd = min((32 // lanes) * SCAN_WARPS, _pow2(dim))
    if SCAN_BLOCK_D is not None:
        bd = min(bd, SCAN_BLOCK_D)
    return bl, _floor_pow2(bd)


def linear_blocks(L: int, Q: int) -> tuple[int, int]:
    """``(block_l, block_q)`` of the linear-scan kernels (tiles of about ``LINEAR_TILE`` elements)."""
    bl = max(min(LINEAR_BLOCK_L, _pow2(L)), 4)
    return bl, _floor_pow2(min(_pow2(Q), LINEAR_TILE // bl))


def _cdt(*tensors) -> torch.dtype:
    return torch.float64 if any(t is not None and t.dtype == torch.float64 for t in tensors) else torch.float32


def _chunks(n: int, size: int) -> int:
    return (n + size - 1) // size


# ---------------------------------------------------------------------------------------------------------------
# selective scan

def _check_layout(u: Tensor, B: Tensor, C: Tensor) -> None:
    """The operators take arguments validated by :func:`neurodyn.ops.selective_scan.check_selective_scan_args`; the one
    layout the kernels could misread silently is a 3-D (batch, n, L) coefficient (pass it as (batch, 1, n, L))."""
    for name, W in (("B", B), ("C", C)):
        if W.dim() not in (2, 4):
            raise ValueError(f"selective_scan_triton: {name} has shape {tuple(W.shape)}; the operator takes (d, n) or "
                             f"(batch, groups, n, L) (a (batch, n, L) coefficient as (batch, 1, n, L))")


def _kernel_op(name: str, schema: str, module: str, method: str, device_of: int = 0):
    """The operator ``neurodyn::<name>`` whose implementation is ``method`` of the Triton kernel module ``module``,
    loaded for the device of argument ``device_of`` and called with the operator's arguments as they are."""
    def implementation(*args):
        return getattr(triton_loader.load(module, args[device_of].device), method)(*args)
    return torch.library.custom_op(f"neurodyn::{name}", implementation, mutates_args=(), schema=schema)


_SS_ARGS = ("Tensor u, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor? z, Tensor? delta_bias, "
            "Tensor? h0")


@torch.library.custom_op("neurodyn::selective_scan_triton", mutates_args=(), schema=(
    f"({_SS_ARGS}, bool softplus, bool reverse, bool save_checkpoints, int block_l, int block_d, bool zoh) "
    "-> (Tensor, Tensor, Tensor)"))
def _ss_fwd(u, delta, A, B, C, D, z, delta_bias, h0, softplus, reverse, save_checkpoints, block_l, block_d, zoh):
    _check_layout(u, B, C)
    k = triton_loader.load("selective_scan", u.device)
    return k.fwd(u, delta, A, B, C, D, z, delta_bias, h0, softplus, reverse, save_checkpoints, block_l, block_d, zoh)


@_ss_fwd.register_fake
def _ss_fwd_fake(u, delta, A, B, C, D, z, delta_bias, h0, softplus, reverse, save_checkpoints, block_l, block_d,
                 zoh):
    batch, dim, L = u.shape
    n = A.shape[1]
    cdt = _cdt(u, delta, A, B, C, D, z, delta_bias, h0)
    ckpt = (u.new_empty(batch, dim, _chunks(L, block_l), n, dtype=cdt) if save_checkpoints
            else u.new_empty(0, dtype=cdt))
    return u.new_empty(u.shape), u.new_empty(batch, dim, n, dtype=cdt), ckpt


@torch.library.custom_op("neurodyn::selective_scan_triton_bwd", mutates_args=(), schema=(
    f"({_SS_ARGS}, Tensor ckpt, Tensor gout, Tensor? glast, bool softplus, bool reverse, int block_l, int block_d, "
    "bool zoh) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"))
def _ss_bwd(u, delta, A, B, C, D, z, delta_bias, h0, ckpt, gout, glast, softplus, reverse, block_l, block_d, zoh):
    _check_layout(u, B, C)
    k = triton_loader.load("selective_scan", u.device)
    return k.bwd(u, delta, A, B, C, D, z, delta_bias, h0, ckpt, gout, glast, softplus, reverse, block_l, block_d, zoh)


@_ss_bwd.register_fake
def _ss_bwd_fake(u, delta, A, B, C, D, z, delta_bias, h0, ckpt, gout, glast, softplus, reverse, block_l, block_d,
                 zoh):
    batch, dim, _ = u.shape
    n = A.shape[1]
    cdt = _cdt(u, delta, A, B, C, D, z, delta_bias, h0)
    new = lambda *shape: u.new_empty(*shape, dtype=cdt)  # noqa: E731
    coef = lambda W: new(*W.shape) if W.dim() == 4 else new(batch, dim, n)  # noqa: E731
    return (u.new_empty(u.shape), delta.new_empty(delta.shape), z.new_empty(z.shape) if z is not None else new(0),
            new(batch, dim, n) if h0 is not None else new(0), new(batch, dim, n), coef(B), coef(C), new(batch, dim),
            new(batch, dim))


def _ss_setup(ctx, inputs, output):
    u, delta, A, B, C, D, z, delta_bias, h0, softplus, reverse, save, block_l, block_d, zoh = inputs
    ctx.flags = (softplus, reverse, block_l, block_d, zoh)
    ctx.has = tuple(t is not None for t in (D, z, delta_bias, h0))
    opt = [t for t in (D, z, delta_bias, h0) if t is not None]
    ctx.save_for_backward(u, delta, A, B, C, output[2], *opt)


def _ss_backward(ctx, gout, glast, _gckpt):
    u, delta, A, B, C, ckpt, *rest = ctx.saved_tensors
    it = iter(rest)
    D, z, delta_bias, h0 = (next(it) if h else None for h in ctx.has)
    if ckpt.numel() == 0 and u.numel() > 0:
        raise RuntimeError("selective_scan_triton: backward without checkpoints (the forward was called with "
                           "save_checkpoints=False)")
    gu, gdelta, gz, gh0, gA, gB, gC, gD, gbias = _ss_bwd(
        u, delta, A, B, C, D, z, delta_bias, h0, ckpt, gout.contiguous(), None if glast is None else glast.contiguous(),
        *ctx.flags)
    like = lambda g, t: g.to(t.dtype)  # noqa: E731
    return (gu, gdelta, like(gA.sum(0), A), like(gB if B.dim() == 4 else gB.sum(0), B),
            like(gC if C.dim() == 4 else gC.sum(0), C), like(gD.sum(0), D) if D is not None else None,
            gz if z is not None else None, like(gbias.sum(0), delta_bias) if delta_bias is not None else None,
            like(gh0, h0) if h0 is not None else None, None, None, None, None, None, None)


_ss_fwd.register_autograd(_ss_backward, setup_context=_ss_setup)


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def selective_scan_triton(u, delta, A, B, C, D=None, z=None, delta_bias=None, softplus=False, reverse=False,
                          initial_state=None, zoh=False):
    """The selective scan on the Triton kernels; arguments validated, ``B, C`` 2-D ``(d, n)`` or 4-D
    ``(batch, G, n, L)``. Returns ``(out (batch, d, L) in u's dtype, last (batch, d, n) in float32/64)``.

    ``zoh=True``: the Kirchhoff cell's exact zero-order-hold input factor ``(1 - exp(dt A)) / (-A)`` in place of
    ``dt`` (``A < 0``; :func:`neurodyn.ops.knc_scan.knc_scan`)."""
    triton_loader.check_device(u, "selective_scan")
    batch, dim, L = u.shape
    block_l, block_d = scan_blocks(dim, A.shape[1], L)
    c = lambda t: None if t is None else t.contiguous()  # noqa: E731
    save = _needs_grad(u, delta, A, B, C, D, z, delta_bias, initial_state)
    out, last, _ = _ss_fwd(c(u), c(delta), c(A), c(B), c(C), c(D), c(z), c(delta_bias), c(initial_state), softplus,
                           reverse, save, block_l, block_d, zoh)
    return out, last


# ---------------------------------------------------------------------------------------------------------------
# multi-head scan (time-major): the selective-scan kernels reading head_scan's layout in place


_hs_fwd = _kernel_op("head_scan_triton", (
    "(Tensor u, Tensor dt, Tensor A, Tensor B, Tensor C, Tensor? D, bool save_checkpoints, int block_l, int block_d) "
    "-> (Tensor, Tensor)"), "selective_scan", "head_fwd")


@_hs_fwd.register_fake
def _hs_fwd_fake(u, dt, A, B, C, D, save_checkpoints, block_l, block_d):
    batch, S, L, HP = u.shape
    cdt = _cdt(u, dt, A, B, C, D)
    ckpt = (u.new_empty(batch * S, HP, _chunks(L, block_l), B.shape[4], dtype=cdt) if save_checkpoints
            else u.new_empty(0, dtype=cdt))
    return u.new_empty(u.shape), ckpt


_hs_bwd = _kernel_op("head_scan_triton_bwd", (
    "(Tensor u, Tensor dt, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor ckpt, Tensor gy, int block_l, "
    "int block_d) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"), "selective_scan", "head_bwd")


@_hs_bwd.register_fake
def _hs_bwd_fake(u, dt, A, B, C, D, ckpt, gy, block_l, block_d):
    batch, S, L, HP = u.shape
    cdt = _cdt(u, dt, A, B, C, D)
    new = lambda *shape: u.new_empty(*shape, dtype=cdt)  # noqa: E731
    return (u.new_empty(u.shape), new(*u.shape), new(batch * S, HP, B.shape[4]), new(*B.shape), new(*C.shape),
            new(batch * S, HP))


def _hs_setup(ctx, inputs, output):
    u, dt, A, B, C, D, save, block_l, block_d = inputs
    ctx.blocks = (block_l, block_d)
    ctx.has_D = D is not None
    ctx.save_for_backward(u, dt, A, B, C, output[1], *((D,) if D is not None else ()))


def _hs_backward(ctx, gy, _gckpt):
    u, dt, A, B, C, ckpt, *opt = ctx.saved_tensors
    D = opt[0] if ctx.has_D else None
    gu, gdt, gA, gB, gC, gD = _hs_bwd(u, dt, A, B, C, D, ckpt, gy.contiguous(), *ctx.blocks)
    batch, S, L, HP = u.shape
    H = dt.shape[3]
    P = HP // H
    return (gu, gdt.view(batch, S, L, H, P).sum(-1).to(dt.dtype),
            gA.view(batch, S, H, P, -1).sum((0, 3, 4)).to(A.dtype), gB.to(B.dtype), gC.to(C.dtype),
            gD.view(batch, S, HP).sum(0).to(D.dtype) if D is not None else None, None, None, None)


_hs_fwd.register_autograd(_hs_backward, setup_context=_hs_setup)


def head_scan_triton(u, dt, A, B, C, D=None) -> Tensor:
    """:func:`neurodyn.ops.head_scan.head_scan` on the selective-scan kernels, reading its time-major layout in place
    (arguments validated): ``u (batch, S, L, H P)``, ``dt (batch, S, L, H)``, ``A (S, H)``, ``B, C (batch, S, L, G,
    N)``, ``D (S, H P)``; ``y`` like u. One program per (batch, set, block of channels); a channel reads its head's
    step and decay, its group's B and C."""
    triton_loader.check_device(u, "head_scan")
    block_l, block_d = scan_blocks(u.shape[3], B.shape[4], u.shape[2])
    c = lambda t: None if t is None else t.contiguous()  # noqa: E731
    save = _needs_grad(u, dt, A, B, C, D)
    return _hs_fwd(c(u), c(dt), c(A), c(B), c(C), c(D), save, block_l, block_d)[0]


# ---------------------------------------------------------------------------------------------------------------
# linear scan


_ls_fwd = _kernel_op("linear_scan_triton", "(Tensor a, Tensor x, Tensor? h0, bool reverse, int block_l, int block_q) "
                     "-> Tensor", "linear_scan", "fwd", device_of=1)


@_ls_fwd.register_fake
def _ls_fwd_fake(a, x, h0, reverse, block_l, block_q):
    return x.new_empty(x.shape)


_ls_bwd = _kernel_op("linear_scan_triton_bwd", "(Tensor a, Tensor h, Tensor? h0, Tensor gh, bool reverse, int block_l, "
                     "int block_q) -> (Tensor, Tensor, Tensor)", "linear_scan", "bwd", device_of=1)


@_ls_bwd.register_fake
def _ls_bwd_fake(a, h, h0, gh, reverse, block_l, block_q):
    return a.new_empty(a.shape), h.new_empty(h.shape), h0.new_empty(h0.shape) if h0 is not None else h.new_empty(0)


def _ls_setup(ctx, inputs, output):
    a, x, h0, reverse, block_l, block_q = inputs
    ctx.flags = (reverse, block_l, block_q)
    ctx.has_h0 = h0 is not None
    ctx.save_for_backward(a, output, *((h0,) if h0 is not None else ()))


def _ls_backward(ctx, gh):
    a, h, *opt = ctx.saved_tensors
    h0 = opt[0] if ctx.has_h0 else None
    ga, gx, gh0 = _ls_bwd(a, h, h0, gh.contiguous(), *ctx.flags)
    return ga, gx, gh0 if h0 is not None else None, None, None, None


_ls_fwd.register_autograd(_ls_backward, setup_context=_ls_setup)


def linear_scan_triton(a: Tensor, x: Tensor, h0: Tensor | None, reverse: bool) -> Tensor:
    """``h_t = a_t h_{t-1} + x_t`` along dim 1 of ``(P, L, Q)`` tensors ``a``, ``x`` (``h0: (P, Q)``) on the Triton
    kernels; ``h`` in x's dtype, accumulated in float32 (float64 for float64 inputs)."""
    triton_loader.check_device(x, "linear_scan")
    block_l, block_q = linear_blocks(x.shape[1], x.shape[2])
    return _ls_fwd(a.contiguous(), x.contiguous(), None if h0 is None else h0.contiguous(), reverse, block_l,
                   block_q)


# ---------------------------------------------------------------------------------------------------------------
# 2-D scan, every direction in one launch


def scan2d_warps(block_d: int, bn: int, bq: int) -> int:
    """Warps of the 2-D kernels: 1 to 8, four elements of a ``(block_d, bn, bq)`` row tile per thread (eight from 1,024
    elements on)."""
    tile = block_d * bn * bq
    return max(1, min(8, tile // 128)) if tile <= 1024 else 8


def scan2d_geometry(H: int, W: int, dirs, seg: int, rows: int) -> tuple[int, int, int]:
    """``(BQ, segments, row blocks)`` of the 2-D kernels: frame rows of ``W`` cells padded to ``BQ`` (``max(H, W)``
    when a direction is transposed), ``H`` frame rows (``max(H, W)``) in segments of ``seg`` rows, blocks of
    ``rows`` rows (a multiple of ``seg``)."""
    transposed = any(dirs[0::3])
    bq = _pow2(max(H, W) if transposed else W)
    nseg = _chunks(max(H, W) if transposed else H, seg)
    return bq, nseg, _chunks(nseg, max(rows // seg, 1))


def scan2d_blocks(batch: int, K: int, dim: int, n: int, H: int, W: int, transposed: bool = True):
    """``(seg, rows, block_d, block_n)`` of the 2-D kernels, or None when one channel's row of states (``n_pow2 x
    BQ``) exceeds ``SCAN2D_MAX_ROW`` elements.

    ``block_d`` channels and ``block_n`` states per program (a ``(block_d, block_n, BQ)`` row tile of about
    ``SCAN2D_TILE`` elements: the channels share their B and C loads; the states are split into blocks only when
    one channel's row exceeds the tile); the backward keeps ``seg + 1`` rows of states in registers (``SCAN2D_SEG``: a
    checkpoint every ``seg`` rows); the rows are split into blocks of ``rows`` rows (a carry pass between them) until
    ``batch x K x channel blocks x row blocks`` reaches ``SCAN2D_PROGRAMS``."""
    bq = _pow2(max(H, W) if transposed else W)
    row = _pow2(n) * bq
    if row > SCAN2D_MAX_ROW:
        return None
    block_d = _floor_pow2(min(_pow2(dim), max(SCAN2D_TILE // row, 1)))
    block_n = min(_pow2(n), max(SCAN2D_TILE // bq, 1))
    P = max(H, W) if transposed else H
    seg = max(1, min(SCAN2D_SEG, _pow2(P)))
    nseg = _chunks(P, seg)
    base = batch * K * _chunks(dim, block_d) * (_pow2(n) // block_n)
    blocks = max(1, min(nseg, _chunks(SCAN2D_PROGRAMS, max(base, 1))))
    return seg, _chunks(nseg, blocks) * seg, block_d, block_n


_S2_ARGS = ("Tensor x, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor R, Tensor? bias, int[] dirs, "
            "bool softplus, int form")


_s2_fwd = _kernel_op("scan2d_triton", f"({_S2_ARGS}, bool save_checkpoints, int seg, int rows, int block_d, "
                     "int block_n) -> (Tensor, Tensor, Tensor)", "scan_2d", "fwd")


@_s2_fwd.register_fake
def _s2_fwd_fake(x, delta, A, B, C, D, R, bias, dirs, softplus, form, save_checkpoints, seg, rows, block_d, block_n):
    batch, dim, H, W = x.shape
    K, _, n = A.shape
    cdt = _cdt(x, delta, A, B, C, D, R, bias)
    bq, nseg, nblk = scan2d_geometry(H, W, dirs, seg, rows)
    new = lambda *shape: x.new_empty(*shape, dtype=cdt)  # noqa: E731
    return (new(batch, K, dim, H, W), new(batch, K, dim, nseg + 1, n, bq) if save_checkpoints else new(0),
            new(batch, K, dim, nblk, bq) if nblk > 1 else new(0))


_s2_bwd = _kernel_op("scan2d_triton_bwd", f"({_S2_ARGS}, Tensor ckpt, Tensor dsum, Tensor gy, int seg, int rows, "
                     "int block_d, int block_n) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
                     "scan_2d", "bwd")


@_s2_bwd.register_fake
def _s2_bwd_fake(x, delta, A, B, C, D, R, bias, dirs, softplus, form, ckpt, dsum, gy, seg, rows, block_d, block_n):
    cdt = _cdt(x, delta, A, B, C, D, R, bias)
    K, dim, _ = A.shape
    new = lambda *shape: x.new_empty(*shape, dtype=cdt)  # noqa: E731
    return (new(*x.shape), new(*delta.shape), new(*B.shape), new(*C.shape), new(*A.shape), new(*A.shape),
            new(K, dim), new(K, dim))


def _s2_setup(ctx, inputs, output):
    x, delta, A, B, C, D, R, bias, dirs, softplus, form, save, seg, rows, block_d, block_n = inputs
    ctx.flags = (dirs, softplus, form)
    ctx.blocks = (seg, rows, block_d, block_n)
    ctx.has = (D is not None, bias is not None)
    ctx.save_for_backward(x, delta, A, B, C, R, output[1], output[2], *(t for t in (D, bias) if t is not None))


def _s2_backward(ctx, gy, _gckpt, _gdsum):
    x, delta, A, B, C, R, ckpt, dsum, *opt = ctx.saved_tensors
    it = iter(opt)
    D, bias = (next(it) if h else None for h in ctx.has)
    if ckpt.numel() == 0 and x.numel() > 0:
        raise RuntimeError("scan2d_triton: backward without checkpoints (the forward was called with "
                           "save_checkpoints=False)")
    gx, gdelta, gB, gC, gA, gR, gD, gbias = _s2_bwd(x, delta, A, B, C, D, R, bias, *ctx.flags, ckpt, dsum, gy,
                                                     *ctx.blocks)
    like = lambda g, t: None if t is None else g.to(t.dtype)  # noqa: E731
    return (like(gx, x), like(gdelta, delta), like(gA, A), like(gB, B), like(gC, C), like(gD, D), like(gR, R),
            like(gbias, bias), None, None, None, None, None, None, None, None)


_s2_fwd.register_autograd(_s2_backward, setup_context=_s2_setup)


def scan2d_triton(x, delta, A, B, C, D, R, bias, dirs, softplus: bool, form: int, blocks) -> Tensor:
    """Every direction of :func:`neurodyn.ops.scan_2d.selective_scan_2d` in one launch of the fused Triton kernels.

    ``x (batch, d, H, W)`` (any strides: read in place); ``delta (batch, d, H, W)`` or ``(batch, K, d, H, W)``;
    ``A, R (K, d, n)``; ``B, C (batch, n, H, W)`` or ``(batch, K, n, H, W)``; ``D, bias (K, d)`` or None; x, delta,
    B, C in any float dtype, A, R, D, bias in the accumulation dtype (float32, or float64); ``dirs`` the flattened
    ``(K, 3)`` table of ``(transpose, flip rows, flip columns)``; ``softplus``: ``dt = softplus(delta + bias)``;
    ``form`` indexes ``("cbx", "eq9", "alg2")``; ``blocks`` from :func:`scan2d_blocks` (the caller checks it is not
    None). Returns ``y (batch, K, d, H, W)`` in the accumulation dtype, one output per direction, in the grid frame."""
    triton_loader.check_device(x, "selective_scan_2d")
    c = lambda t: None if t is None else t.contiguous()  # noqa: E731
    save = _needs_grad(x, delta, A, B, C, D, R, bias)
    return _s2_fwd(x, c(delta), c(A), c(B), c(C), c(D), c(R), c(bias), [int(v) for v in dirs], bool(softplus), form,
                   save, *blocks)[0]


# ---------------------------------------------------------------------------------------------------------------
# NCP backbone (packed layers: neurodyn.ops.ncp_mlp.pack_layers)

NCP_BLOCK_M = 128  # rows per program at most: 16 per warp (an MMA tile's height), up to 8 warps


def ncp_blocks(M: int, H: int) -> int:
    """Rows per program of the NCP kernels for ``M`` rows (``H``, the packed widths' sum, kept for the tile policy):
    a power of two from 16 (one warp) to ``NCP_BLOCK_M`` (the kernels run a warp per 16 rows; the weights a program
    reads from L2 are shared by its rows)."""
    return max(16, min(NCP_BLOCK_M, _pow2(M)))


_NCP_ARGS = "Tensor x, Tensor w_in, Tensor bias, Tensor w_rec, Tensor mask, Tensor? in_scale, Tensor? in_shift"


_ncp_fwd = _kernel_op("ncp_mlp_triton", f"({_NCP_ARGS}, int[] widths, int[] inputs, int act, int h_out, "
                      "int block_m) -> Tensor", "ncp_mlp", "fwd")


@_ncp_fwd.register_fake
def _ncp_fwd_fake(x, w_in, bias, w_rec, mask, in_scale, in_shift, widths, inputs, act, h_out, block_m):
    return x.new_empty(x.shape[0], x.shape[1], h_out)


_ncp_bwd = _kernel_op("ncp_mlp_triton_bwd", f"({_NCP_ARGS}, Tensor gy, int[] widths, int[] inputs, int act, "
                      "int block_m) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", "ncp_mlp", "bwd")


@_ncp_bwd.register_fake
def _ncp_bwd_fake(x, w_in, bias, w_rec, mask, in_scale, in_shift, gy, widths, inputs, act, block_m):
    new = lambda *shape: x.new_empty(*shape, dtype=torch.float32)  # noqa: E731
    io = (new(x.shape[0], x.shape[2]), new(x.shape[0], x.shape[2])) if in_scale is not None else (new(0), new(0))
    return new(*w_in.shape), new(*bias.shape), new(*w_rec.shape), *io, x.new_empty(x.shape)


def _ncp_setup(ctx, inputs, output):
    x, w_in, bias, w_rec, mask, in_scale, in_shift, widths, has_input, act, h_out, block_m = inputs
    ctx.flags = (widths, has_input, act, block_m)
    ctx.affine = in_scale is not None
    ctx.save_for_backward(x, w_in, bias, w_rec, mask, *((in_scale, in_shift) if ctx.affine else ()))


def _ncp_backward(ctx, gy):
    x, w_in, bias, w_rec, mask, *io = ctx.saved_tensors
    in_scale, in_shift = io if ctx.affine else (None, None)
    gw_in, gb, gw_rec, gsc, gsh, gx = _ncp_bwd(x, w_in, bias, w_rec, mask, in_scale, in_shift, gy.contiguous(),
                                               *ctx.flags)
    like = lambda g, t: None if t is None else g.to(t.dtype)  # noqa: E731
    return (gx, like(gw_in, w_in), like(gb, bias), like(gw_rec, w_rec), None, like(gsc, in_scale),
            like(gsh, in_shift), None, None, None, None, None)


_ncp_fwd.register_autograd(_ncp_backward, setup_context=_ncp_setup)


def ncp_mlp_triton(x: Tensor, w_in: Tensor, bias: Tensor, w_rec: Tensor, mask: Tensor, widths, inputs, act: int,
                   h_out: int, in_scale: Tensor | None = None, in_shift: Tensor | None = None) -> Tensor:
    """The NCP backbone on the Triton kernels, on packed layers (:func:`neurodyn.ops.ncp_mlp.pack_layers`, each layer
    at its own width): ``x (C, M, a)``, ``w_in (C, sum A H_l)``, ``bias (C, sum H_l)``, ``w_rec (C, sum H_{l-1}
    H_l)``, ``mask (sum H_l,)``, ``widths`` the packed widths ``H_l``, ``inputs`` 0/1 per layer (an input term),
    optional ``in_scale, in_shift (C, a)``; ``act`` a code of ``ACT_CODES``. Returns ``y (C, M, h_out)`` in x's
    dtype (float32 arithmetic)."""
    triton_loader.check_device(x, "ncp_mlp")
    c = lambda t: None if t is None else t.contiguous()  # noqa: E731
    widths, inputs = [int(w) for w in widths], [int(i) for i in inputs]
    return _ncp_fwd(c(x), c(w_in), c(bias), c(w_rec), c(mask), c(in_scale), c(in_shift), widths, inputs, act, h_out,
                    ncp_blocks(x.shape[1], sum(widths)))


OPS = {"selective_scan_triton": _ss_fwd, "selective_scan_triton_bwd": _ss_bwd, "linear_scan_triton": _ls_fwd,
       "linear_scan_triton_bwd": _ls_bwd, "scan2d_triton": _s2_fwd, "scan2d_triton_bwd": _s2_bwd,
       "head_scan_triton": _hs_fwd, "head_scan_triton_bwd": _hs_bwd, "ncp_mlp_triton": _ncp_fwd,
       "ncp_mlp_triton_bwd": _ncp_bwd}
