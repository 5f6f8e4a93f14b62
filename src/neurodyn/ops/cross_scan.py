"""Four-way cross-scan of a 2-D grid (LaMO / GeoMaNO / VMamba SS2D) and its inverse.

A ``(batch, H, W, c)`` grid is read in four orders (the paper order of GeoMaNO, Sec. 4.2):

==========  ================================================  flat index visited at step s
``row``      row-major, top-left -> bottom-right               ``s``
``row_rev``  row-major, bottom-right -> top-left               ``HW-1-s``
``col``      column-major, top-left -> bottom-right            ``(s % H) * W + s // H``
``col_rev``  column-major, bottom-right -> top-left            that of ``col`` at ``HW-1-s``
==========  ================================================  =============================

VMamba's own code stacks ``(row, col, row_rev, col_rev)``; pass ``directions=VMAMBA_ORDER`` for it.
``cross_scan`` gives ``(batch, K, H*W, c)`` sequences; ``cross_merge`` maps each sequence back to the
grid and sums over directions, so it is the adjoint of ``cross_scan``, and ``cross_unscan`` (no sum)
is its exact inverse. Both are implemented with flips and transposes, which equal the index
permutations of :func:`cross_scan_indices`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .directions import resolve_directions

Tensor = torch.Tensor

PAPER_ORDER = ("row", "row_rev", "col", "col_rev")
VMAMBA_ORDER = ("row", "col", "row_rev", "col_rev")
_KNOWN = set(PAPER_ORDER)


def _directions(directions: Sequence[str] | str) -> tuple[str, ...]:
    return resolve_directions(directions, _KNOWN)


def _check_grid(name: str, x: Tensor) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} has shape {shape}, expected a channels-last grid (batch, H, W, c)")


def cross_scan_indices(H: int, W: int, directions: Sequence[str] = PAPER_ORDER) -> Tensor:
    """``(K, H*W)`` long tensor: entry ``[k, s]`` is the row-major grid index visited at step s."""
    grid = torch.arange(H * W).view(H, W)
    out = []
    for d in _directions(directions):
        seq = grid.reshape(-1) if d.startswith("row") else grid.t().reshape(-1)
        out.append(seq.flip(0) if d.endswith("_rev") else seq)
    return torch.stack(out)


def cross_scan(x: Tensor, directions: Sequence[str] = PAPER_ORDER) -> Tensor:
    """``(batch, H, W, c)`` grid -> ``(batch, K, H*W, c)`` sequences, one per direction."""
    _check_grid("x", x)
    b, H, W, c = x.shape
    rows = x.reshape(b, H * W, c)
    cols = None
    seqs = []
    for d in _directions(directions):
        if d.startswith("row"):
            s = rows
        else:
            if cols is None:
                cols = x.transpose(1, 2).reshape(b, H * W, c)
            s = cols
        seqs.append(s.flip(1) if d.endswith("_rev") else s)
    return torch.stack(seqs, dim=1)


def _unscan_one(s: Tensor, d: str, H: int, W: int) -> Tensor:
    b, _, c = s.shape
    s = s.flip(1) if d.endswith("_rev") else s
    return s.reshape(b, H, W, c) if d.startswith("row") else s.reshape(b, W, H, c).transpose(1, 2)


def _check_seqs(y: Tensor, H: int, W: int, directions: tuple[str, ...]) -> None:
    if not isinstance(y, torch.Tensor) or y.dim() != 4 or y.shape[1] != len(directions) or y.shape[2] != H * W:
        raise ValueError(
            f"y has shape {tuple(getattr(y, 'shape', ()))}, expected (batch, K, H*W, c) with K = "
            f"{len(directions)} and H*W = {H * W}"
        )


def cross_unscan(y: Tensor, H: int, W: int, directions: Sequence[str] = PAPER_ORDER) -> Tensor:
    """Inverse of :func:`cross_scan`: ``(batch, K, H*W, c)`` -> ``(batch, K, H, W, c)``."""
    directions = _directions(directions)
    _check_seqs(y, H, W, directions)
    # unbind, not y[:, k]: the backward of K selects would build and fill K zero tensors of y's size
    return torch.stack([_unscan_one(yk, d, H, W) for yk, d in zip(y.unbind(1), directions)], dim=1)


def cross_merge(y: Tensor, H: int, W: int, directions: Sequence[str] = PAPER_ORDER) -> Tensor:
    """Sum of the un-scanned directions: ``(batch, K, H*W, c)`` -> ``(batch, H, W, c)``."""
    directions = _directions(directions)
    _check_seqs(y, H, W, directions)
    out = None
    for yk, d in zip(y.unbind(1), directions):  # unbind: one stacked gradient, no zero-filled copies
        g = _unscan_one(yk, d, H, W)
        out = g.contiguous() if out is None else out + g
    return out
