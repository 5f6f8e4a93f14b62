"""GeoMaNO's 2-D scan on its Triton kernels (``triton_kernels.py``) as operators, their tiles, and the call the public
function makes.

``torch.ops.neurodyn.scan2d_triton(x, delta, A, B, C, D?, R, bias?, dirs, softplus, form, save_checkpoints, rows,
block_d, block_n) -> (y, ckpt, dsum)`` and ``scan2d_triton_bwd`` (:func:`neurodyn.ops.custom_op.define_op`): every
direction with its correction in one launch (direction a program axis, frames by strides, softplus and bias fused),
``y (batch, K, d, H, W)``; ``ckpt (batch, K, d, P + 1, n, BQ)`` holds the column states entering every frame row (and
leaving the last; ``P`` the most frame rows of a direction), ``dsum`` the column sums of the steps over each block of
``rows`` rows (empty with one block); ``block_d, block_n``: the carry pass's tile.
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
    "SCAN2D_PROGRAMS",
    "scan2d_blocks",
    "scan2d_fwd_tile",
    "scan2d_bwd_tile",
    "scan2d_geometry",
    "scan2d_triton",
    "scan2d_warps",
]

SCAN2D_TILE = 1024  # elements of the carry pass's (channels, n_pow2, BQ) tile (4 per thread, 8 warps)
SCAN2D_MAX_ROW = 8192  # states of one channel's row (n_pow2 x BQ) the kernels take (split in state blocks)
SCAN2D_PROGRAMS = 1024  # programs wanted per launch: rows split into blocks (a carry pass) below it


def scan2d_warps(block_d: int, bn: int, bq: int) -> int:
    """Warps of the carry pass: 1 to 8, four elements of a ``(block_d, bn, bq)`` tile per thread (eight from 1,024
    elements on)."""
    tile = block_d * bn * bq
    return max(1, min(8, tile // 128)) if tile <= 1024 else 8


class Tile(NamedTuple):
    """The forward's and the backward's tile: ``lanes`` threads of ``cols`` consecutive frame columns each cover a
    row (``lanes x cols = BQ``), ``32 / lanes`` channels per warp, ``warps`` warps: ``block_d`` channels per program;
    ``block_n`` states per program, an unrolled loop whose row tiles stay in registers from row to row (``nb``
    programs share a channel's states: their sums over the states are added atomically)."""

    block_d: int
    block_n: int
    nb: int
    lanes: int
    cols: int
    warps: int


# the tiles measured in the static report (sm_80 and sm_90, no spill): 8 columns per thread spill the forward (72-208 B
# at 255 registers), 8 states per backward program spill it (4-56 B); 2 states keep it at 168-202 registers
SCAN2D_FWD_COLS = 4  # frame columns per thread (the in-thread part of a row scan; 4 registers per state tile)
SCAN2D_FWD_STATES = 8  # states per forward program (more are split over programs, y added atomically)
SCAN2D_BWD_COLS = 4
SCAN2D_BWD_STATES = 2  # states per backward program (gx and gdelta added atomically over the state blocks)
SCAN2D_WARPS = 1  # warps per program of both


def _tile(dim: int, n: int, bq: int, cols: int, states: int) -> Tile:
    cols = min(cols, bq)
    lanes = bq // cols
    if lanes > 32:
        lanes, cols = 32, bq // 32
    warps = max(1, min(SCAN2D_WARPS, cdiv(dim, 32 // lanes)))
    nb = cdiv(n, states)
    return Tile((32 // lanes) * warps, cdiv(n, nb), nb, lanes, cols, warps)


def scan2d_fwd_tile(dim: int, n: int, bq: int) -> Tile:
    """The forward's :class:`Tile` for ``dim`` channels, ``n`` states and frame rows padded to ``bq``."""
    return _tile(dim, n, bq, SCAN2D_FWD_COLS, SCAN2D_FWD_STATES)


def scan2d_bwd_tile(dim: int, n: int, bq: int) -> Tile:
    """The backward's tile: the forward's layout, ``SCAN2D_BWD_STATES`` states per program."""
    return _tile(dim, n, bq, SCAN2D_BWD_COLS, SCAN2D_BWD_STATES)


def scan2d_geometry(H: int, W: int, dirs, rows: int) -> tuple[int, int, int]:
    """``(BQ, P, row blocks)`` of the 2-D kernels: frame rows of ``W`` cells padded to ``BQ`` (``max(H, W)`` when a
    direction is transposed), ``P = H`` frame rows (``max(H, W)``) in blocks of ``rows`` rows."""
    transposed = any(dirs[0::3])
    bq = ceil_pow2(max(H, W) if transposed else W)
    P = max(H, W) if transposed else H
    return bq, P, cdiv(P, rows)


def scan2d_blocks(batch: int, K: int, dim: int, n: int, H: int, W: int, transposed: bool = True):
    """``(rows, block_d, block_n)`` of the 2-D kernels, or None when one channel's row of states (``n_pow2 x BQ``)
    exceeds ``SCAN2D_MAX_ROW`` elements.

    The rows are split into blocks of ``rows`` rows (a carry pass between them) until the forward's ``batch x K x
    channel blocks x state blocks x row blocks`` programs (:func:`scan2d_fwd_tile`) reach ``SCAN2D_PROGRAMS``; the
    carry pass runs on ``(block_d, block_n, BQ)`` tiles of about ``SCAN2D_TILE`` elements (the states split into
    blocks only when one channel's row exceeds the tile)."""
    bq = ceil_pow2(max(H, W) if transposed else W)
    row = ceil_pow2(n) * bq
    if row > SCAN2D_MAX_ROW:
        return None
    block_d = floor_pow2(min(ceil_pow2(dim), max(SCAN2D_TILE // row, 1)))
    block_n = min(ceil_pow2(n), max(SCAN2D_TILE // bq, 1))
    P = max(H, W) if transposed else H
    fwd = scan2d_fwd_tile(dim, n, bq)
    base = batch * K * cdiv(dim, fwd.block_d) * fwd.nb
    blocks = max(1, min(P, cdiv(SCAN2D_PROGRAMS, max(base, 1))))
    return cdiv(P, blocks), block_d, block_n


_ARGS = (
    "Tensor x, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor R, Tensor? bias, int[] dirs, "
    "bool softplus, int form"
)


def _bwd_fake(x, delta, A, B, C, D, R, bias, dirs, softplus, form, ckpt, dsum, gy, rows, block_d, block_n):
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
    f"({_ARGS}, Tensor ckpt, Tensor dsum, Tensor gy, int rows, int block_d, "
    "int block_n) -> (Tensor gx, Tensor gdelta, Tensor gB, Tensor gC, Tensor gA, Tensor gR, Tensor gD, Tensor gbias)",
    triton_loader.launcher("scan_2d", "bwd"),
    _bwd_fake,
    backend="triton",
)


def _fwd_fake(x, delta, A, B, C, D, R, bias, dirs, softplus, form, save_checkpoints, rows, block_d, block_n):
    batch, dim, H, W = x.shape
    K, _, n = A.shape
    cdt = compute_dtype(x, delta, A, B, C, D, R, bias)
    bq, P, nblk = scan2d_geometry(H, W, dirs, rows)
    new = lambda *shape: x.new_empty(*shape, dtype=cdt)  # noqa: E731
    return (
        new(batch, K, dim, H, W),
        new(batch, K, dim, P + 1, n, bq) if save_checkpoints else new(0),
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
    f"({_ARGS}, bool save_checkpoints, int rows, int block_d, int block_n) -> (Tensor y, Tensor ckpt, Tensor dsum)",
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
