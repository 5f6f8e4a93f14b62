"""The fused CPU kernels as PyTorch operators: ``torch.ops.neurodyn.*``, each with a schema, a CPU kernel and a fake.

The C++ library (``csrc/``, built by :mod:`neurodyn.ops.cpu_kernel`) registers its functions as
``torch.ops.neurodyn_scan.*`` with ``m.def(name, &fn)``: an inferred schema with unnamed arguments and the kernel as
``CompositeImplicitAutograd``, the key of operators that are made of other PyTorch operators. Tracers take that at
its word: FakeTensor propagation, ``make_fx`` (AOTAutograd, ``torch.export``) and the autograd keys all run the kernel
itself on tensors without data, which is why ``torch.compile`` and ``torch.export`` failed on every model that
reaches a kernel. A fake registered on such an operator is never consulted.

So the operators the wrappers call are defined here, one per kernel entry point, in their own namespace
``neurodyn``: a named schema, a ``CPU`` kernel that calls the compiled ``neurodyn_scan`` function (built on first
call), and a fake (``torch.library.register_fake``) that computes every output's shape and dtype as the C++ does,
the saved state the backward needs included. Outputs the C++ leaves undefined (no checkpoints without a gradient,
no ``h0`` gradient without ``h0``) are empty tensors here, and gradients the C++ returns as views of one buffer are
copied, so that no output aliases another. The operators are opaque to the tracers and first order: the autograd
formulas are the ``torch.autograd.Function`` wrappers beside each kernel (``scan_cpu``, ``head_scan``,
``scan_2d``, ``linear_scan``, ``ncp_mlp``), which call the forward op in ``forward`` and the backward op in
``backward``; Dynamo traces them without a graph break and AOTAutograd compiles both.

Defining an operator does not build anything: the definitions are made at import, the library is built when a
kernel first runs. :func:`available` (the wrappers' test for the fused path) is a constant for ``torch.compile``,
so tracing never enters the build.

Output layouts that depend on the kernels' blocking constants (the checkpoint chunks of the scans, the lane count and
chunk of the head scan, the row tile of the NCP backbone) are mirrored below; ``tests/ops/test_compile_export.py``
runs ``torch.library.opcheck`` on every operator, which compares each fake with the real outputs.
"""
from __future__ import annotations

import torch

from . import cpu_kernel

Tensor = torch.Tensor

__all__ = ["available", "constant_for_compile", "head_lanes", "OPS"]

_NS = "neurodyn"
# blocking constants of csrc/ that fix the shapes of the saved state (kept equal by the opcheck test)
SCAN_CHUNK = 64     # selective_scan_cpu.cpp CHUNK: a checkpoint every 64 steps
SCAN2D_ROWS = 8     # selective_scan_cpu.cpp ROWS: a row-state checkpoint every 8 rows
HEAD_CHUNK = 32     # head_scan_cpu.cpp HCHUNK
HEAD_LANES = {torch.float32: 16, torch.float64: 8}  # head_scan_cpu.cpp HLanes<T>::W (64 bytes of channels)
NCP_TILE = 16       # ncp_cpu.cpp R: rows per tile

_SCHEMAS = {
    "selective_scan_fwd": "(Tensor u, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor? h0, "
                          "bool save_checkpoints, bool zoh) -> (Tensor out, Tensor last, Tensor ckpt)",
    "selective_scan_bwd": "(Tensor u, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor? h0, Tensor ckpt, "
                          "Tensor gout, Tensor? glast, bool zoh) -> (Tensor gu, Tensor gdelta, Tensor gA, Tensor gB, "
                          "Tensor gC, Tensor gD, Tensor gh0)",
    "linear_scan": "(Tensor a, Tensor x, Tensor? h0, bool reverse) -> Tensor",
    "scan2d_fwd": "(Tensor x, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor R, int form, "
                  "bool save_checkpoints) -> (Tensor y, Tensor ckpt)",
    "scan2d_bwd": "(Tensor x, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor R, int form, Tensor ckpt, "
                  "Tensor gout) -> (Tensor gx, Tensor gdelta, Tensor gA, Tensor gB, Tensor gC, Tensor gD, Tensor gR)",
    "head_scan_fwd": "(Tensor u, Tensor dt, Tensor A, Tensor B, Tensor C, Tensor? D, bool save_checkpoints) "
                     "-> (Tensor y, Tensor ckpt)",
    "head_scan_bwd": "(Tensor u, Tensor dt, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor ckpt, Tensor gout) "
                     "-> (Tensor gu, Tensor gdt, Tensor gA, Tensor gB, Tensor gC, Tensor gD)",
    "ncp_mlp_fwd": "(Tensor x, Tensor[] w_in, Tensor[] bias, Tensor[] w_rec, Tensor[] mask, int act, "
                   "Tensor[] pattern_in, Tensor[] pattern_rec, Tensor[] io) -> Tensor[]",
    "ncp_mlp_bwd": "(Tensor x, Tensor[] w_in, Tensor[] bias, Tensor[] w_rec, Tensor[] mask, Tensor[] saved, "
                   "Tensor gout, int act, Tensor[] pattern_in, Tensor[] pattern_rec, Tensor[] io, Tensor ghead) "
                   "-> Tensor[]",
}

_LIB = torch.library.Library(_NS, "DEF")
for _name, _schema in _SCHEMAS.items():
    _LIB.define(_name + _schema)
    # first-order primitives: differentiated by the wrappers' autograd.Functions, not by autograd through them
    # (a fallthrough says so: without it autograd's fallback marks the outputs as requiring grad and warns)
    _LIB.impl(_name, torch.library.fallthrough_kernel, "Autograd")

# the operators, by name (OpOverloads: called directly, without the packet's overload resolution)
OPS = {name: getattr(getattr(torch.ops, _NS), name).default for name in _SCHEMAS}


def constant_for_compile(fn):
    """Mark ``fn`` as ``torch.compiler.assume_constant_result`` does (Dynamo calls it while tracing and uses its result
    as a constant, never tracing into it), without importing ``torch._dynamo`` (2 s) when neurodyn is imported.
    ``tests/ops/test_compile_export.py`` checks that the mark is still the one torch's decorator sets."""
    fn._dynamo_marked_constant = True
    return fn


@constant_for_compile
def available() -> bool:
    """Whether the fused CPU kernels are built and loaded (builds them on the first call of a process).

    A constant for ``torch.compile``: it is evaluated once while tracing, never traced into."""
    return cpu_kernel.get() is not None


def head_lanes(dtype: torch.dtype) -> int:
    """Channels per vector lane block of the head-scan kernel: a head's channel count must be a multiple of it."""
    return HEAD_LANES[torch.float64 if dtype == torch.float64 else torch.float32]


def _ext():
    ext = cpu_kernel.get()
    if ext is None:
        raise RuntimeError("neurodyn: the fused CPU kernels are unavailable (no compiler / ninja, a failed build, or "
                           "NEURODYN_NO_CPP_EXT=1); the torch.ops.neurodyn operators need them")
    return ext


def _defined(t: Tensor | None, like: Tensor) -> Tensor:
    """An output the C++ may leave undefined (None in Python) as an empty tensor."""
    return like.new_empty(0) if t is None else t


def _impl(name):
    def register(fn):
        _LIB.impl(name, fn, "CPU")
        return fn
    return register


def _fake(name):
    def register(fn):
        torch.library.register_fake(f"{_NS}::{name}", fn, lib=_LIB)
        return fn
    return register


def _chunks(n, size):
    return (n + size - 1) // size


# ---------------------------------------------------------------------------------------------------------------
# selective scan (csrc/selective_scan_cpu.cpp): u, delta (batch, d, L); A (d, n_pad); B, C (d, n_pad) or
# (batch, G, L, n_pad); D (d,); h0 (batch, d, n_pad)


@_impl("selective_scan_fwd")
def _selective_scan_fwd(u, delta, A, B, C, D, h0, save_checkpoints, zoh):
    out, last, ckpt = _ext().selective_scan_fwd(u, delta, A, B, C, D, h0, save_checkpoints, zoh)
    return out, last, _defined(ckpt, u)


@_fake("selective_scan_fwd")
def _selective_scan_fwd_fake(u, delta, A, B, C, D, h0, save_checkpoints, zoh):
    batch, dim, L = u.shape
    np_ = A.shape[1]
    ckpt = u.new_empty(batch, dim, _chunks(L, SCAN_CHUNK), np_) if save_checkpoints else u.new_empty(0)
    return u.new_empty(u.shape), u.new_empty(batch, dim, np_), ckpt


@_impl("selective_scan_bwd")
def _selective_scan_bwd(u, delta, A, B, C, D, h0, ckpt, gout, glast, zoh):
    gu, gdelta, gA, gB, gC, gD, gh0 = _ext().selective_scan_bwd(u, delta, A, B, C, D, h0, ckpt, gout, glast, zoh)
    return gu, gdelta, gA, gB, gC, gD, _defined(gh0, u)


@_fake("selective_scan_bwd")
def _selective_scan_bwd_fake(u, delta, A, B, C, D, h0, ckpt, gout, glast, zoh):
    batch, dim, _ = u.shape
    np_ = A.shape[1]
    f64 = lambda *shape: u.new_empty(*shape, dtype=torch.float64)  # noqa: E731 - the kernel's per-row partial sums
    coef = lambda W: W.new_empty(W.shape) if W.dim() == 4 else f64(batch, dim, np_)  # noqa: E731
    gh0 = u.new_empty(batch, dim, np_) if h0 is not None else u.new_empty(0)
    return (u.new_empty(u.shape), u.new_empty(u.shape), f64(batch, dim, np_), coef(B), coef(C), f64(batch, dim),
            gh0)


# ---------------------------------------------------------------------------------------------------------------
# linear scan: h_t = a_t h_{t-1} + x_t along dim 1 of (P, L, Q)


@_impl("linear_scan")
def _linear_scan(a, x, h0, reverse):
    return _ext().linear_scan(a, x, h0, reverse)


@_fake("linear_scan")
def _linear_scan_fake(a, x, h0, reverse):
    return x.new_empty(x.shape)


# ---------------------------------------------------------------------------------------------------------------
# 2-D scan, one direction: x, delta (batch, d, H, W); A, R (d, n_pad); B, C (batch, H, W, n_pad); D (d,)


@_impl("scan2d_fwd")
def _scan2d_fwd(x, delta, A, B, C, D, R, form, save_checkpoints):
    y, ckpt = _ext().scan2d_fwd(x, delta, A, B, C, D, R, form, save_checkpoints)
    if ckpt is None:
        return y, x.new_empty(0)
    # the kernel stores the column states entering row blocks 1 .. nck - 1 in slots 0 .. nck - 2 and leaves the last
    # slot unwritten (the backward never reads it); zeroed here (one row of states per channel), so that the output
    # is a function of the inputs like every other
    ckpt[:, :, -1].zero_()
    return y, ckpt


@_fake("scan2d_fwd")
def _scan2d_fwd_fake(x, delta, A, B, C, D, R, form, save_checkpoints):
    batch, dim, H, W = x.shape
    ckpt = (x.new_empty(batch, dim, _chunks(H, SCAN2D_ROWS), W, A.shape[1]) if save_checkpoints
            else x.new_empty(0))
    return x.new_empty(x.shape), ckpt


@_impl("scan2d_bwd")
def _scan2d_bwd(x, delta, A, B, C, D, R, form, ckpt, gout):
    return tuple(_ext().scan2d_bwd(x, delta, A, B, C, D, R, form, ckpt, gout))


@_fake("scan2d_bwd")
def _scan2d_bwd_fake(x, delta, A, B, C, D, R, form, ckpt, gout):
    batch, dim = x.shape[:2]
    np_ = A.shape[1]
    f64 = lambda *shape: x.new_empty(*shape, dtype=torch.float64)  # noqa: E731
    return (x.new_empty(x.shape), x.new_empty(x.shape), f64(batch, dim, np_), B.new_empty(B.shape),
            C.new_empty(C.shape), f64(batch, dim), f64(batch, dim, np_))


# ---------------------------------------------------------------------------------------------------------------
# multi-head scan: u (batch, S, L, H P); dt (batch, S, L, H); A (S, H); B, C (batch, S, L, G, N); D (S, H P).
# One task = one lane block of one head: tasks = batch S H (P / lanes).


def _head_tasks(u, dt):
    batch, S, L, HP = u.shape
    H = dt.shape[3]
    lanes = head_lanes(u.dtype)
    nblk = (HP // H) // lanes
    return batch * S * H * nblk, nblk, lanes


@_impl("head_scan_fwd")
def _head_scan_fwd(u, dt, A, B, C, D, save_checkpoints):
    y, ckpt = _ext().head_scan_fwd(u, dt, A, B, C, D, save_checkpoints)
    return y, _defined(ckpt, u)


@_fake("head_scan_fwd")
def _head_scan_fwd_fake(u, dt, A, B, C, D, save_checkpoints):
    tasks, _, lanes = _head_tasks(u, dt)
    ckpt = (u.new_empty(tasks, _chunks(u.shape[2], HEAD_CHUNK), B.shape[4], lanes) if save_checkpoints
            else u.new_empty(0))
    return u.new_empty(u.shape), ckpt


@_impl("head_scan_bwd")
def _head_scan_bwd(u, dt, A, B, C, D, ckpt, gout):
    return tuple(_ext().head_scan_bwd(u, dt, A, B, C, D, ckpt, gout))


@_fake("head_scan_bwd")
def _head_scan_bwd_fake(u, dt, A, B, C, D, ckpt, gout):
    batch, S, L, _ = u.shape
    H, N = dt.shape[3], B.shape[4]
    tasks, nblk, lanes = _head_tasks(u, dt)
    f64 = lambda *shape: u.new_empty(*shape, dtype=torch.float64)  # noqa: E731
    return (u.new_empty(u.shape), u.new_empty(batch, S, L, H, nblk), f64(tasks), u.new_empty(tasks, L, N),
            u.new_empty(tasks, L, N), f64(tasks, lanes))


# ---------------------------------------------------------------------------------------------------------------
# NCP backbone: x (C, M, a); per layer w_in (C, a, h) or empty, bias (C, h), w_rec (C, h_prev, h) (w_rec[0] empty),
# mask (h,); io = in_scale, in_shift (C, a), head_w (C, a, o), head_b (C, o), each empty when unused.


@_impl("ncp_mlp_fwd")
def _ncp_mlp_fwd(x, w_in, bias, w_rec, mask, act, pattern_in, pattern_rec, io):
    return _ext().ncp_mlp_fwd(x, w_in, bias, w_rec, mask, act, pattern_in, pattern_rec, io)


@_fake("ncp_mlp_fwd")
def _ncp_mlp_fwd_fake(x, w_in, bias, w_rec, mask, act, pattern_in, pattern_rec, io):
    C, M, _ = x.shape
    tiles = _chunks(M, NCP_TILE)
    saved = [x.new_empty(C, tiles, b.shape[1], NCP_TILE) for b in bias]
    head = x.new_empty(C, M, io[2].shape[-1]) if io[2].numel() > 0 else x.new_empty(0)
    return [*saved, x.new_empty(C, M, bias[-1].shape[1]), head]


def _owned(t: Tensor) -> Tensor:
    """``t`` as a contiguous tensor that is the whole of its storage: a copy when it is a view into a larger buffer, a
    new tensor of its shape when it is empty (the kernel returns one empty tensor for several unused gradients)."""
    if t.numel() == 0:
        return t.new_empty(t.shape)
    if t.is_contiguous() and t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.numel() * t.element_size():
        return t
    return t.clone(memory_format=torch.contiguous_format)


@_impl("ncp_mlp_bwd")
def _ncp_mlp_bwd(x, w_in, bias, w_rec, mask, saved, gout, act, pattern_in, pattern_rec, io, ghead):
    grads = _ext().ncp_mlp_bwd(x, w_in, bias, w_rec, mask, saved, gout, act, pattern_in, pattern_rec, io, ghead)
    # the bias and input-affine / head gradients are slices of one per-cell buffer: copied apart (weight-sized)
    return [_owned(g) for g in grads]


@_fake("ncp_mlp_bwd")
def _ncp_mlp_bwd_fake(x, w_in, bias, w_rec, mask, saved, gout, act, pattern_in, pattern_rec, io, ghead):
    empty = lambda: x.new_empty(0)  # noqa: E731
    like = lambda t: t.new_empty(t.shape) if t.numel() > 0 else empty()  # noqa: E731
    grads = [x.new_empty(x.shape)]
    for l, b in enumerate(bias):  # w_in: an empty tensor (of any shape) means no input term, and gets an empty grad
        grads += [like(w_in[l]), b.new_empty(b.shape), w_rec[l].new_empty(w_rec[l].shape) if l > 0 else empty()]
    return grads + [like(t) for t in io]
