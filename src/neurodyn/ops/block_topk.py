"""Top-K key selection for sparse attention (NAC, paper 002, Algorithm 2) and its exhaustive reference.

:func:`block_topk` picks ``K`` keys per query through square-root block centroids without forming the
``Tq x Tk`` score matrix; :func:`exact_topk` scores every key (``O(Tq Tk)`` memory). The block search is
an approximation: its reference relation is recall against :func:`exact_topk` (exact when the selected
blocks cover every key), not equality. :func:`flat_gather` gathers the picked rows.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["block_topk", "exact_topk", "flat_gather"]


def flat_gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``x: (G, N, D)``, ``idx: (G, *I)`` -> ``(G, *I, D)`` (no index expanded over D)."""
    g = torch.arange(x.shape[0], device=x.device).reshape(-1, *([1] * (idx.dim() - 1)))
    return x[g, idx]


def block_topk(q: torch.Tensor, k: torch.Tensor, topk: int, key_mask: torch.Tensor | None = None,
               query_chunk: int = 2048) -> tuple[torch.Tensor, torch.Tensor]:
    """Algorithm 2: sub-quadratic Top-K key selection by square-root block partitioning.

    ``q: (G, Tq, D)``, ``k: (G, Tk, D)``, ``key_mask: (G, Tk)`` (True = real key). Keys are cut into
    ``N_b = ceil(Tk / B_s)`` blocks of ``B_s = floor(sqrt(Tk))`` (the last block padded and its padding
    masked), each query scores the block centroids (means of the valid keys), keeps the best
    ``M = max(1, ceil(K / B_s))`` blocks (so that ``M B_s >= K``), scores the ``M B_s`` candidate keys
    and keeps the best ``K_eff = min(K, M B_s)``. Scores are raw dot products. Returns key indices
    ``(G, Tq, K_eff)`` and their validity (False for padding / masked keys picked only to fill K).
    Queries are processed ``query_chunk`` at a time, so the largest intermediate is
    ``query_chunk x max(N_b, M B_s) x D``: no ``Tq x Tk`` matrix is ever formed.
    """
    G, Tk, D = k.shape
    Tq = q.shape[1]
    bs = max(1, math.isqrt(Tk))
    nb = -(-Tk // bs)
    pad = nb * bs - Tk
    valid = torch.ones(G, Tk, dtype=torch.bool, device=k.device) if key_mask is None else key_mask.bool()
    kp = F.pad(k, (0, 0, 0, pad))
    vp = F.pad(valid, (0, pad), value=False)
    kb, vb = kp.reshape(G, nb, bs, D), vp.reshape(G, nb, bs)
    count = vb.sum(-1)                                                      # (G, nb)
    centroid = (kb * vb[..., None]).sum(-2) / count.clamp_min(1)[..., None].to(k.dtype)
    m = min(nb, max(1, -(-topk // bs)))
    k_eff = min(topk, m * bs)
    offs = torch.arange(bs, device=k.device)
    idx_parts, ok_parts = [], []
    for lo in range(0, Tq, query_chunk):
        qc = q[:, lo:lo + query_chunk]                                      # (G, c, D)
        coarse = qc @ centroid.transpose(1, 2)                              # (G, c, nb)
        coarse = coarse.masked_fill((count == 0)[:, None, :], float("-inf"))
        blocks = coarse.topk(m, dim=-1).indices                             # (G, c, m)
        c = qc.shape[1]
        cand = (blocks[..., None] * bs + offs).reshape(G, c, m * bs)
        g = torch.arange(G, device=k.device)[:, None, None]
        cand_ok = vb[g, blocks].reshape(G, c, m * bs)                       # (G, c, m*bs)
        k_cand = kb[g, blocks].reshape(G, c, m * bs, D)                      # whole blocks: contiguous copies
        fine = torch.matmul(k_cand, qc[..., None])[..., 0]                  # (G, c, m*bs)
        fine = fine.masked_fill(~cand_ok, float("-inf"))
        top = fine.topk(k_eff, dim=-1).indices
        idx_parts.append(cand.gather(-1, top))
        ok_parts.append(cand_ok.gather(-1, top))
    # picks of padding (only when fewer valid candidates than K) point at a real key and are marked invalid
    return torch.cat(idx_parts, 1).clamp_max(Tk - 1), torch.cat(ok_parts, 1)


def exact_topk(q: torch.Tensor, k: torch.Tensor, topk: int,
               key_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Exhaustive Top-K: the full ``(G, Tq, Tk)`` dot-product matrix, then ``top_k`` (O(n^2) memory)."""
    scores = q @ k.transpose(1, 2)
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask.bool()[:, None, :], float("-inf"))
    k_eff = min(topk, k.shape[1])
    top = scores.topk(k_eff, dim=-1)
    ok = torch.isfinite(top.values) if key_mask is not None else torch.ones_like(top.indices, dtype=torch.bool)
    return top.indices, ok
