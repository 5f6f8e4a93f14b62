"""GeoMaNO's 2-D scan on its Triton kernels (``triton_kernels.py``) as operators, their tiles, and the call the public
function makes.

``torch.ops.neurodyn.scan2d_triton(x, delta, A, B, C, D?, R, bias?, dirs, softplus, form, save_checkpoints, seg,
rows, block_d, block_n) -> (y, ckpt, dsum)`` and ``scan2d_triton_bwd`` (:func:`neurodyn.ops.custom_op.define_op`):
every direction with its correction in one launch (direction a program axis, frames by strides, softplus and bias
fused), ``y (batch, K, d, H, W)``; ``ckpt (batch, K, d, nseg + 1, n, BQ)`` holds the column states entering every
segment of ``seg`` rows (and leaving the last), ``dsum`` the column sums of the steps over each block of ``rows``
rows (empty with one block).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .. import triton_loader
from ..custom_op import cdiv, compute_dtype, contiguous, define_op, needs_grad
from ..triton_loader import ceil_pow2, floor_pow2

Tensor = torch.Tensor

__all__ = [
    "SCAN2D_TILE",
    "SCAN2D_MAX_ROW",
    "SCAN2D_SEG",
    "SCAN2D_PROGRAMS",
    "scan2d_blocks",
    "scan2d_fwd_tile",
    "scan2d_geometry",
    "scan2d_triton",
    "scan2d_warps",
]

SCAN2D_TILE = 1024  # elements of a program's (channels, n_pow2, BQ) row tile (4 per thread, 8 warps)
SCAN2D_MAX_ROW = 8192  # states of one channel's row (n_pow2 x BQ) the kernels take (split in state blocks)
SCAN2D_SEG = 1  # rows per backward segment (a checkpoint every segment): ptxas for sm_90 spills the
# backward from 2 on at n = 16, W = 64 (4 elements per thread or 8, 4 or 8 warps)
SCAN2D_PROGRAMS = 1024  # programs wanted per launch: rows split into blocks (a carry pass) below it


def scan2d_warps(block_d: int, bn: int, bq: int) -> int:
    """Warps of the 2-D kernels: 1 to 8, four elements of a ``(block_d, bn, bq)`` row tile per thread (eight from 1,024
    elements on)."""
    tile = block_d * bn * bq
    return max(1, min(8, tile // 128)) if tile <= 1024 else 8


class FwdTile(NamedTuple):
    """The forward kernel's tile: ``lanes`` threads of ``cols`` consecutive frame columns each cover a row (``lanes x
    cols = BQ``), ``32 / lanes`` channels per warp, ``warps`` warps: ``block_d`` channels per program; ``block_n``
    states per program, an unrolled loop whose row tiles stay in registers from row to row (``nb`` programs share a
    channel's states: y is then added atomically)."""

    block_d: int
    block_n: int
    nb: int
    lanes: int
    cols: int
    warps: int


SCAN2D_FWD_COLS = 4  # frame columns per thread in the forward (its in-thread row scan; 8 registers per state tile)
SCAN2D_FWD_STATES = 8  # states per forward program (more split over programs, y added atomically)
SCAN2D_FWD_WARPS = 1


def scan2d_fwd_tile(dim: int, n: int, bq: int) -> FwdTile:
    """The forward's :class:`FwdTile` for ``dim`` channels, ``n`` states and frame rows padded to ``bq``."""
    cols = min(SCAN2D_FWD_COLS, bq)
    lanes = bq // cols
    if lanes > 32:
        lanes, cols = 32, bq // 32
    warps = max(1, min(SCAN2D_FWD_WARPS, cdiv(dim, 32 // lanes)))
    block_d = (32 // lanes) * warps
    nb = cdiv(n, SCAN2D_FWD_STATES)
    return FwdTile(block_d, cdiv(n, nb), nb, lanes, cols, warps)


def scan2d_geometry(H: int, W: int, dirs, seg: int, rows: int) -> tuple[int, int, int]:
    """``(BQ, segments, row blocks)`` of the 2-D kernels: frame rows of ``W`` cells padded to ``BQ`` (``max(H, W)``
    when a direction is transposed), ``H`` frame rows (``max(H, W)``) in segments of ``seg`` rows, blocks of
    ``rows`` rows (a multiple of ``seg``)."""
    transposed = any(dirs[0::3])
    bq = ceil_pow2(max(H, W) if transposed else W)
    nseg = cdiv(max(H, W) if transposed else H, seg)
    return bq, nseg, cdiv(nseg, max(rows // seg, 1))


def scan2d_blocks(batch: int, K: int, dim: int, n: int, H: int, W: int, transposed: bool = True):
    """``(seg, rows, block_d, block_n)`` of the 2-D kernels, or None when one channel's row of states (``n_pow2 x
    BQ``) exceeds ``SCAN2D_MAX_ROW`` elements.

    ``block_d`` channels and ``block_n`` states per program (a ``(block_d, block_n, BQ)`` row tile of about
    ``SCAN2D_TILE`` elements: the channels share their B and C loads; the states are split into blocks only when
    one channel's row exceeds the tile); the backward keeps ``seg + 1`` rows of states in registers (``SCAN2D_SEG``: a
    checkpoint every ``seg`` rows); the rows are split into blocks of ``rows`` rows (a carry pass between them) until
    ``batch x K x channel blocks x row blocks`` reaches ``SCAN2D_PROGRAMS``."""
    bq = ceil_pow2(max(H, W) if transposed else W)
    row = ceil_pow2(n) * bq
    if row > SCAN2D_MAX_ROW:
        return None
    block_d = floor_pow2(min(ceil_pow2(dim), max(SCAN2D_TILE // row, 1)))
    block_n = min(ceil_pow2(n), max(SCAN2D_TILE // bq, 1))
    P = max(H, W) if transposed else H
    seg = max(1, min(SCAN2D_SEG, ceil_pow2(P)))
    nseg = cdiv(P, seg)
    base = batch * K * cdiv(dim, block_d) * (ceil_pow2(n) // block_n)
    blocks = max(1, min(nseg, cdiv(SCAN2D_PROGRAMS, max(base, 1))))
    return seg, cdiv(nseg, blocks) * seg, block_d, block_n


_ARGS = (
    "Tensor x, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor R, Tensor? bias, int[] dirs, "
    "bool softplus, int form"
)


def _bwd_fake(x, delta, A, B, C, D, R, bias, dirs, softplus, form, ckpt, dsum, gy, seg, rows, block_d, block_n):
    cdt = compute_dtype(x, delta, A, B, C, D, R, bias)
    K, dim, _ = A.shape
    new = lambda *shape: x.new_empty(*shape, dtype=cdt)  # noqa: E731
    return (
        new(*x.shape),
        new(*delta.shape),
        new(*B.shape),
        new(*C.shape),
        new(*A.shape),
        new(*A.shape),
        new(K, dim),
        new(K, dim),
    )


scan2d_triton_bwd = define_op(
    "scan2d_triton_bwd",
    f"({_ARGS}, Tensor ckpt, Tensor dsum, Tensor gy, int seg, int rows, int block_d, "
    "int block_n) -> (Tensor gx, Tensor gdelta, Tensor gB, Tensor gC, Tensor gA, Tensor gR, Tensor gD, Tensor gbias)",
    triton_loader.launcher("scan_2d", "bwd"),
    _bwd_fake,
    backend="triton",
)


def _fwd_fake(x, delta, A, B, C, D, R, bias, dirs, softplus, form, save_checkpoints, seg, rows, block_d, block_n):
    batch, dim, H, W = x.shape
    K, _, n = A.shape
    cdt = compute_dtype(x, delta, A, B, C, D, R, bias)
    bq, nseg, nblk = scan2d_geometry(H, W, dirs, seg, rows)
    new = lambda *shape: x.new_empty(*shape, dtype=cdt)  # noqa: E731
    return (
        new(batch, K, dim, H, W),
        new(batch, K, dim, nseg + 1, n, bq) if save_checkpoints else new(0),
        new(batch, K, dim, nblk, bq) if nblk > 1 else new(0),
    )


def _backward(s, gy, _gckpt, _gdsum):
    if s.ckpt.numel() == 0 and s.x.numel() > 0:
        raise RuntimeError(
            "scan2d_triton: backward without checkpoints (the forward was called with save_checkpoints=False)"
        )
    gx, gdelta, gB, gC, gA, gR, gD, gbias = scan2d_triton_bwd(
        s.x,
        s.delta,
        s.A,
        s.B,
        s.C,
        s.D,
        s.R,
        s.bias,
        s.dirs,
        s.softplus,
        s.form,
        s.ckpt,
        s.dsum,
        gy,
        s.seg,
        s.rows,
        s.block_d,
        s.block_n,
    )
    like = lambda g, t: None if t is None else g.to(t.dtype)  # noqa: E731
    return {
        "x": like(gx, s.x),
        "delta": like(gdelta, s.delta),
        "A": like(gA, s.A),
        "B": like(gB, s.B),
        "C": like(gC, s.C),
        "D": like(gD, s.D),
        "R": like(gR, s.R),
        "bias": like(gbias, s.bias),
    }


scan2d_triton_op = define_op(
    "scan2d_triton",
    f"({_ARGS}, bool save_checkpoints, int seg, int rows, int block_d, int block_n) -> (Tensor y, "
    "Tensor ckpt, Tensor dsum)",
    triton_loader.launcher("scan_2d", "fwd"),
    _fwd_fake,
    backend="triton",
    save=("x", "delta", "A", "B", "C", "D", "R", "bias", "ckpt", "dsum"),
    backward=_backward,
)


def scan2d_triton(x, delta, A, B, C, D, R, bias, dirs, softplus: bool, form: int, blocks) -> Tensor:
    """Every direction of :func:`neurodyn.ops.scan_2d.selective_scan_2d` in one launch of the fused Triton kernels.

    ``x (batch, d, H, W)`` (any strides: read in place); ``delta (batch, d, H, W)`` or ``(batch, K, d, H, W)``;
    ``A, R (K, d, n)``; ``B, C (batch, n, H, W)`` or ``(batch, K, n, H, W)``; ``D, bias (K, d)`` or None; x, delta,
    B, C in any float dtype, A, R, D, bias in the accumulation dtype (float32, or float64); ``dirs`` the flattened
    ``(K, 3)`` table of ``(transpose, flip rows, flip columns)``; ``softplus``: ``dt = softplus(delta + bias)``;
    ``form`` indexes ``("cbx", "eq9", "alg2")``; ``blocks`` from :func:`scan2d_blocks` (the caller checks it is not
    None). Returns ``y (batch, K, d, H, W)`` in the accumulation dtype, one output per direction, in the grid frame."""
    triton_loader.check_device(x, "selective_scan_2d")
    args = [x] + [contiguous(t) for t in (delta, A, B, C, D, R, bias)]
    return scan2d_triton_op(*args, [int(v) for v in dirs], bool(softplus), form, needs_grad(*args), *blocks)[0]
