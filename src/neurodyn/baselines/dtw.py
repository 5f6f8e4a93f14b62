"""Distances between multivariate series of one length: squared Euclidean and dynamic time warping.

``a (N, L, C)``, ``b (M, L', C)`` -> ``(N, M)``.

* :func:`euclidean_distances`: ``sum_{i,c} (a[n,i,c] - b[m,i,c])^2`` (``L == L'``), computed by differences (no
  ``|a|^2 + |b|^2 - 2ab`` expansion, whose cancellation would break ties between near neighbours).
* :func:`dtw_distances`: dependent multivariate DTW (one warping path for all channels) with the squared
  Euclidean point cost ``d(i, j) = |a_i - b_j|^2`` and the recursion
  ``D(i, j) = d(i, j) + min(D(i-1, j-1), D(i-1, j), D(i, j-1))``, ``D(0, 0) = 0``; the value is ``D(L, L')``.
  A Sakoe-Chiba band of half-width ``window`` keeps only cells with ``|i - j| <= window`` (``None``: no band).
  Vectorised over all pairs and one anti-diagonal at a time (``L + L' - 1`` steps). :func:`dtw_distance_ref` is
  the plain-Python double loop it is tested against.
"""

from __future__ import annotations

import math

import torch


def _check(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    if a.dim() != 3 or b.dim() != 3 or a.shape[-1] != b.shape[-1]:
        raise ValueError(
            f"{what} takes a (N, L, C) and b (M, L', C) with the same channels; got {tuple(a.shape)} "
            f"and {tuple(b.shape)}"
        )


def euclidean_distances(a: torch.Tensor, b: torch.Tensor, chunk_elements: int = 1 << 24) -> torch.Tensor:
    """Squared Euclidean distances ``(N, M)`` between series of equal length (module docstring)."""
    _check(a, b, "euclidean_distances")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"euclidean_distances needs series of one length; got {a.shape[1]} and {b.shape[1]} steps")
    fa, fb = a.flatten(1), b.flatten(1)
    step = max(1, chunk_elements // max(1, fb.numel()))
    return (
        torch.cat([(fa[i : i + step, None] - fb[None]).square().sum(-1) for i in range(0, len(fa), step)])
        if len(fa)
        else fa.new_zeros(0, len(fb))
    )


def dtw_distances(
    a: torch.Tensor, b: torch.Tensor, window: int | None = None, chunk_elements: int = 1 << 24
) -> torch.Tensor:
    """DTW costs ``(N, M)`` of every pair (module docstring); pairs are processed in chunks of about
    ``chunk_elements`` cost-matrix cells."""
    _check(a, b, "dtw_distances")
    if window is not None and window < 0:
        raise ValueError(f"the Sakoe-Chiba window is a number of steps >= 0, got {window}")
    N, L, _ = a.shape
    M, K, _ = b.shape
    if window is not None and abs(L - K) > window:
        raise ValueError(f"no warping path of series of {L} and {K} steps fits a Sakoe-Chiba window of {window}")
    step = max(1, chunk_elements // max(1, M * L * K))
    out = [_dtw_block(a[i : i + step], b, window) for i in range(0, N, step)]
    return torch.cat(out) if out else a.new_zeros(0, M)


def _dtw_block(a: torch.Tensor, b: torch.Tensor, window: int | None) -> torch.Tensor:
    n, L, _ = a.shape
    M, K, _ = b.shape
    cost = (a[:, None, :, None, :] - b[None, :, None, :, :]).square().sum(-1).reshape(n * M, L, K)
    if window is not None:
        i = torch.arange(L, device=a.device)[:, None]
        j = torch.arange(K, device=a.device)[None, :]
        cost = cost.masked_fill((i - j).abs() > window, math.inf)
    R = cost.new_full((n * M, L + 1, K + 1), math.inf)
    R[:, 0, 0] = 0.0
    for k in range(2, L + K + 1):  # anti-diagonal i + j = k of the 1-based table
        i = torch.arange(max(1, k - K), min(L, k - 1) + 1, device=a.device)
        j = k - i
        best = torch.minimum(torch.minimum(R[:, i - 1, j - 1], R[:, i - 1, j]), R[:, i, j - 1])
        R[:, i, j] = cost[:, i - 1, j - 1] + best
    return R[:, L, K].reshape(n, M)


def dtw_distance_ref(a, b, window: int | None = None) -> float:
    """The DTW cost of one pair ``a (L, C)``, ``b (L', C)`` (nested lists or arrays) by the textbook double loop."""
    L, K = len(a), len(b)
    inf = float("inf")
    D = [[inf] * (K + 1) for _ in range(L + 1)]
    D[0][0] = 0.0
    for i in range(1, L + 1):
        for j in range(1, K + 1):
            if window is not None and abs(i - j) > window:
                continue
            d = sum((float(x) - float(y)) ** 2 for x, y in zip(a[i - 1], b[j - 1]))
            D[i][j] = d + min(D[i - 1][j - 1], D[i - 1][j], D[i][j - 1])
    return D[L][K]
