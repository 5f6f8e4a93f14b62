"""Deterministic, resumable, distributed batch order.

Epoch ``e`` visits the training set in ``randperm(n, seed + e)``; global batch ``b`` is the slice
``perm[b*B:(b+1)*B]`` and rank ``r`` of ``W`` takes its ``r``-th contiguous part. The order is a
function of (seed, epoch) only, so a run resumed at batch ``b`` sees exactly what it would have, and
W processes see together what one process sees.
"""

from __future__ import annotations

import numpy as np
import torch


def epoch_permutation(n: int, seed: int, epoch: int, shuffle: bool = True) -> torch.Tensor:
    if not shuffle:
        return torch.arange(n)
    g = torch.Generator().manual_seed(int(seed) * 100_003 + int(epoch))
    return torch.randperm(n, generator=g)


def rank_slice(global_batch: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """The contiguous part of ``global_batch`` that rank ``rank`` of ``world`` processes."""
    bounds = np.linspace(0, len(global_batch), world + 1).round().astype(int)
    return global_batch[bounds[rank] : bounds[rank + 1]]


def global_batches(
    n: int, batch_size: int, seed: int, epoch: int, shuffle: bool = True, world: int = 1
) -> list[torch.Tensor]:
    """The epoch's global batches; with ``world`` processes a last batch smaller than ``world`` is
    dropped, since some process would get no sample (one process keeps every sample)."""
    perm = epoch_permutation(n, seed, epoch, shuffle)
    batches = [perm[i : i + batch_size] for i in range(0, n, batch_size)]
    return [b for b in batches if len(b) >= world]
