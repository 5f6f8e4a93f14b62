"""Top-K key selection for sparse attention (NAC, paper 002, Algorithm 2) and its exhaustive reference.

:func:`block_topk` picks ``K`` keys per query through square-root block centroids without forming the
``Tq x Tk`` score matrix; :func:`exact_topk` scores every key (``O(Tq Tk)`` memory). The block search is
an approximation: its reference relation is recall against :func:`exact_topk` (exact when the selected
blocks cover every key), not equality. :func:`flat_gather` gathers the picked rows.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

__all__ = ["block_topk", "exact_topk", "flat_gather"]


def flat_gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``x: (G, N, D)``, ``idx: (G, *I)`` -> ``(G, *I, D)`` (no index expanded over D).

    One ``index_select`` on the flattened ``(G N, D)`` rows: its backward is an ``index_add_``, where the
    equivalent advanced indexing ``x[g, idx]`` went through ``index_put_(accumulate=True)`` (1.5-2.5x slower
    forward + backward on NAC's (128, 16, 4) keys, one thread)."""
    G, N = x.shape[0], x.shape[1]
    offset = (torch.arange(G, device=x.device) * N).reshape(-1, *([1] * (idx.dim() - 1)))
    rows = x.reshape(G * N, *x.shape[2:]).index_select(0, (idx + offset).reshape(-1))
    return rows.reshape(*idx.shape, *x.shape[2:])


def _best(x: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the ``k`` largest entries along the last dim, largest first (ties in no specified order, as with
    ``topk``). Rows of up to 64 entries use a sort: ``torch.topk(sorted=True)`` took 2.7x as long on NAC's
    (128, 16, 12) scores (a stable sort 1.6x)."""
    if x.shape[-1] <= 64:
        return x.sort(dim=-1, descending=True).indices[..., :k]
    return x.topk(k, dim=-1).indices


def block_topk(
    q: torch.Tensor,
    k: torch.Tensor,
    topk: int,
    key_mask: torch.Tensor | None = None,
    query_chunk: int = 1024,
    spare_blocks: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Algorithm 2: sub-quadratic Top-K key selection by square-root block partitioning.

    ``q: (G, Tq, D)``, ``k: (G, Tk, D)``, ``key_mask: (G, Tk)`` (True = real key). Blocks have
    ``B_s = floor(sqrt(Tk))`` keys; each query scores the ``N_b = ceil(Tk / B_s)`` block centroids,
    keeps the best ``M = min(N_b, ceil(K / B_s) + spare_blocks)`` blocks, scores their keys and keeps
    the best ``K_eff = min(K, M B_s)``. Scores are raw dot products. Returns key indices
    ``(G, Tq, K_eff)`` and their validity (False only when fewer than ``K_eff`` distinct real keys
    were reachable: short or heavily masked sequences).

    Every block holds exactly ``B_s`` real keys (so a padded last block cannot win the coarse search): the real
    keys of each row are compacted to the front (a stable sort of the mask) and the last block of a row is
    ``[n - B_s, n)``, overlapping its neighbour instead of being padded or masked. A padded (or half-masked)
    block's centroid is a mean over fewer keys, so its score has a larger spread and it won the coarse search too
    often -- and then could not fill the K slots (4-5 % invalid slots at T = 32 with no mask at all). Blocks
    that repeat an earlier block (rows shorter than ``N_b B_s``) are skipped and keys picked twice by
    overlapping blocks count once. ``spare_blocks`` (default 1; Algorithm 2's ``M = ceil(K/B_s)`` is
    0) scores one block more than needed to hold K keys: the true top keys of a temporally smooth
    sequence straddle block boundaries, and the spare block raises their recall from 0.72-0.76 to
    0.90-0.92 at T = 32 and 1024 (K = 8, random-walk keys) for ``(M+1)/M`` of the fine-search cost.

    Queries are processed ``query_chunk`` at a time, so the largest intermediate is
    ``query_chunk x max(N_b, M B_s) x D``; a ``query_chunk x Tk`` score matrix is formed only when the ``M`` picked
    blocks hold at least a quarter of the keys (``N_b <= 4 M``: short sequences), where it is cheaper.
    """
    if spare_blocks < 0:
        raise ValueError(f"block_topk spare_blocks must be >= 0, got {spare_blocks}")
    G, Tk, D = k.shape
    Tq = q.shape[1]
    bs = max(1, math.isqrt(Tk))
    nb = -(-Tk // bs)
    m = min(nb, max(1, -(-topk // bs)) + spare_blocks)
    k_eff = min(topk, m * bs)
    if G == 0 or Tq == 0 or Tk == 0:  # no groups, queries or keys: empty picks (Tk = 0 picks none per query)
        return (
            torch.zeros(G, Tq, k_eff, dtype=torch.long, device=k.device),
            torch.zeros(G, Tq, k_eff, dtype=torch.bool, device=k.device),
        )
    blocks = _key_blocks(k, key_mask, bs, nb)
    # blocks can overlap (and a key be reached twice) only when some row is shorter than nb * bs
    may_repeat = key_mask is not None or Tk % bs != 0
    # when the picked blocks hold at least a quarter of the keys, a (chunk, Tk) score matrix costs at most 4x the
    # candidates' scores and replaces a gather of whole blocks and one small matmul per query (NAC, Tk = 16: 3 of 4)
    score_all = nb <= 4 * m
    idx_parts, ok_parts = [], []
    for lo in range(0, Tq, query_chunk):
        pick, ok = _pick(q[:, lo : lo + query_chunk], blocks, m, k_eff, may_repeat, score_all)
        order = blocks.order
        idx_parts.append(pick if order is None else order.gather(1, pick.reshape(G, -1)).reshape(pick.shape))
        ok_parts.append(ok)
    # invalid picks (fewer reachable real keys than K) point at a real position and are marked invalid
    return torch.cat(idx_parts, 1), torch.cat(ok_parts, 1)


class _KeyBlocks(NamedTuple):
    """The keys of each row split into ``nb`` blocks of ``bs`` (:func:`block_topk`'s docstring)."""

    order: torch.Tensor | None  # (G, Tk): compacted position -> key index (None: no mask, keys in place)
    kc: torch.Tensor  # (G, Tk, D): the keys, real ones first
    ids: torch.Tensor  # (G, nb, bs): compacted position of each block's keys
    kb: torch.Tensor  # (G, nb, bs, D): each block's keys
    centroid: torch.Tensor  # (G, nb, D): mean of each block's real keys
    block_off: torch.Tensor  # (G, nb): empty blocks and repeats of the block before
    ok_block: torch.Tensor  # (G, nb, bs): real keys of blocks in use


def _key_blocks(k: torch.Tensor, key_mask: torch.Tensor | None, bs: int, nb: int) -> _KeyBlocks:
    """Real keys compacted to the front of each row, cut into ``nb`` blocks of ``bs`` keys, the last block of a row
    ``[n - bs, n)``; the blocks' centroids."""
    G, Tk, D = k.shape
    dev = k.device
    if key_mask is None:
        order, kc = None, k
        n = torch.full((G,), Tk, dtype=torch.long, device=dev)
    else:
        valid = key_mask.bool()
        order = torch.sort((~valid).to(torch.uint8), dim=-1, stable=True).indices  # real keys first, in order
        kc = flat_gather(k, order)
        n = valid.sum(-1)
    offs = torch.arange(bs, device=dev)
    starts = torch.minimum(torch.arange(nb, device=dev) * bs, (n - bs).clamp_min(0)[:, None])  # (G, nb)
    ids = starts[..., None] + offs  # (G, nb, bs), may run past n
    vb = ids < n[:, None, None]
    ids = ids.clamp_max(Tk - 1)
    kb = flat_gather(kc, ids.reshape(G, nb * bs)).reshape(G, nb, bs, D)
    count = vb.sum(-1)  # (G, nb)
    centroid = (kb * vb[..., None]).sum(-2) / count.clamp_min(1)[..., None].to(k.dtype)
    repeat = torch.zeros_like(count, dtype=torch.bool)
    repeat[:, 1:] = starts[:, 1:] == starts[:, :-1]
    block_off = (count == 0) | repeat  # (G, nb)
    ok_block = vb & ~block_off[..., None]  # (G, nb, bs)
    return _KeyBlocks(order, kc, ids, kb, centroid, block_off, ok_block)


def _pick(
    qc: torch.Tensor, blocks: _KeyBlocks, m: int, k_eff: int, may_repeat: bool, score_all: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk of queries ``qc: (G, c, D)``: the best ``m`` blocks by centroid score, then the best ``k_eff`` of
    their keys. Returns the picks as compacted positions ``(G, c, k_eff)`` and their validity."""
    G, nb, bs, D = blocks.kb.shape
    c = qc.shape[1]
    first_block = (torch.arange(G, device=qc.device) * nb)[:, None, None]
    coarse = (qc @ blocks.centroid.transpose(1, 2)).masked_fill(blocks.block_off[:, None, :], float("-inf"))
    rows = (_best(coarse, m) + first_block).reshape(-1)  # picked blocks as rows of (G nb, .)
    take = lambda t: t.reshape(G * nb, -1).index_select(0, rows)  # noqa: E731 - whole blocks, one copy each
    cand = take(blocks.ids).reshape(G, c, m * bs)  # positions in the compacted row
    cand_ok = take(blocks.ok_block).reshape(G, c, m * bs)
    if may_repeat:  # overlapping blocks: a key reached twice counts once
        srt, perm = torch.sort(cand.masked_fill(~cand_ok, -1), dim=-1)
        dup = torch.zeros_like(cand_ok)
        dup.scatter_(-1, perm, F.pad((srt[..., 1:] == srt[..., :-1]) & (srt[..., 1:] >= 0), (1, 0), value=False))
        cand_ok = cand_ok & ~dup
    if score_all:  # the candidates are a large share of the keys: score every key at once, then pick
        fine = (qc @ blocks.kc.transpose(1, 2)).gather(-1, cand)
    else:
        k_cand = take(blocks.kb).reshape(G, c, m * bs, D)  # whole blocks: contiguous copies
        fine = torch.matmul(k_cand, qc[..., None])[..., 0]  # (G, c, m*bs)
    fine = fine.masked_fill(~cand_ok, float("-inf"))
    top = _best(fine, k_eff)
    return cand.gather(-1, top), cand_ok.gather(-1, top)


def exact_topk(
    q: torch.Tensor, k: torch.Tensor, topk: int, key_mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exhaustive Top-K: the full ``(G, Tq, Tk)`` dot-product matrix, then ``top_k`` (O(n^2) memory)."""
    scores = q @ k.transpose(1, 2)
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask.bool()[:, None, :], float("-inf"))
    k_eff = min(topk, k.shape[1])
    top = _best(scores, k_eff)
    ok = torch.isfinite(scores.gather(-1, top)) if key_mask is not None else torch.ones_like(top, dtype=torch.bool)
    return top, ok
