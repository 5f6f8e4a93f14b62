"""Hydra features (Dempster, Schmidt & Webb, "Hydra: competing convolutional kernels for fast and accurate time
series classification", DMKD 2023), for series ``x (N, L, C)``.

The transform, as the paper describes it:

* **Kernels**: ``g`` groups of ``k`` random kernels of length 9 per dilation (defaults ``k = 8``, ``g = 64``), each
  drawn ``w ~ N(0, I)``, then centred and scaled to unit absolute sum: ``w <- w - mean(w)``, ``w <- w / sum |w|``.
* **Dilations**: ``2^0, 2^1, ..., 2^E``, ``E = floor(log2((L - 1) / 8))`` (the receptive field ``8 d + 1`` never
  exceeds the series); every convolution is zero-padded to the series' length ("same").
* **Representations**: half the groups (``g / 2``) convolve the series, the other half its first difference
  ``x'_t = x_{t+1} - x_t`` (``L - 1`` steps).
* **Competition**: at each time step ``t`` the kernels of a group compete: with ``z_{i,t}`` the response of kernel
  ``i`` of the group, the kernel of the largest response, ``i*(t) = argmax_i z_{i,t}``, adds that response to its
  soft count, and the kernel of the smallest, ``i_*(t) = argmin_i z_{i,t}``, adds one to its hard count:

      ``max_i = sum_t [i*(t) = i] z_{i,t}``,   ``min_i = sum_t [i_*(t) = i]``   (ties: the first kernel).

  Per dilation and representation: ``2 x g/2 x k`` features (``1,024`` per dilation at the defaults).
* **Multivariate series**: each group convolves the sum of ``clip(C // 2, 2, max_channels)`` channels drawn at
  random with replacement (a channel drawn twice counts twice, so a group of a 2-channel series reads one channel
  half the time); the paper's experiments are univariate, and this is the authors' multivariate variant.

The kernels and channel subsets come from ``torch.Generator().manual_seed(seed)``, so a fit is a function of the
training series' shape and the seed (Hydra's kernels do not depend on the data). Layout of a feature vector:
``(dilation, representation, [max, min], group, kernel)``. :func:`hydra_transform_ref` computes the same features by
explicit loops (the test oracle).

The classifier's scaling of these counts (:func:`sparse_scaling`, the paper's): ``s = sqrt(max(f, 0))``, then
``(s - mu) / (sigma + p0^4 + 1e-8)`` where ``s != 0`` and 0 where ``s = 0``, with the training mean ``mu``, standard
deviation ``sigma`` and fraction of zeros ``p0`` of each feature.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

KERNEL_LENGTH = 9
MIN_LENGTH = KERNEL_LENGTH


def hydra_dilations(length: int) -> list[int]:
    """``[1, 2, 4, ..., 2^E]``, ``E = floor(log2((length - 1) / 8))`` (at least ``[1]``)."""
    top = int(math.floor(math.log2((length - 1) / (KERNEL_LENGTH - 1)))) if length > KERNEL_LENGTH else 0
    return [2**e for e in range(max(top, 0) + 1)]


def channels_per_group(n_channels: int, max_channels: int = 8) -> int:
    """Channels each group draws (with replacement): ``clip(C // 2, 2, max_channels)``."""
    return max(2, min(n_channels // 2, max_channels))


def hydra_fit(
    x: torch.Tensor, n_kernels: int = 8, n_groups: int = 64, max_channels: int = 8, seed: int = 0
) -> dict[str, torch.Tensor]:
    """Fit the transform for training series ``x (N, L, C)`` (``L >= 9``; only the shape is read). Returns
    ``dilations (D,)``, ``weights (D, 2, g/2, k, 9)`` (representation 0 the series, 1 its difference) and
    ``channels (D, 2, g/2, C)`` (how many times each group drew each channel: the weights of its sum)."""
    if x.dim() != 3 or x.shape[1] < MIN_LENGTH or len(x) == 0:
        raise ValueError(f"hydra_fit takes series (N, L, C) with N >= 1 and L >= {MIN_LENGTH}; got {tuple(x.shape)}")
    if n_groups < 2 or n_groups % 2 or n_kernels < 2:
        raise ValueError(f"hydra_fit needs an even n_groups >= 2 and n_kernels >= 2; got {n_groups}, {n_kernels}")
    _, L, C = x.shape
    gen = torch.Generator().manual_seed(int(seed))
    dilations = hydra_dilations(L)
    half = n_groups // 2
    w = torch.randn(len(dilations), 2, half, n_kernels, KERNEL_LENGTH, generator=gen, dtype=torch.float64)
    w = w - w.mean(-1, keepdim=True)
    w = w / w.abs().sum(-1, keepdim=True)
    channels = torch.ones(len(dilations), 2, half, C)
    if C > 1:
        m = channels_per_group(C, max_channels)
        drawn = torch.randint(C, (len(dilations), 2, half, m), generator=gen)
        channels = torch.nn.functional.one_hot(drawn, C).sum(-2).float()
    return {"dilations": torch.tensor(dilations), "weights": w.float().to(x.device), "channels": channels.to(x.device)}


def n_output_features(params: dict[str, torch.Tensor]) -> int:
    """Features per series: ``D x 2 x 2 x g/2 x k``."""
    D, reps, half, k, _ = params["weights"].shape
    return D * reps * 2 * half * k


def hydra_transform(x: torch.Tensor, params: dict[str, torch.Tensor], chunk_elements: int = 1 << 24) -> torch.Tensor:
    """Features ``(N, D x 2 x 2 x g/2 x k)`` of ``x (N, L, C)`` under ``params`` (module docstring), in ``x``'s
    dtype. ``chunk_elements``: about the most convolution outputs held at once."""
    N, L, _ = x.shape
    D, reps, half, k, _ = params["weights"].shape
    step = max(1, chunk_elements // max(1, half * k * L))
    rows = []
    for lo in range(0, N, step):
        xs = x[lo : lo + step]
        n = len(xs)
        series = (xs, torch.diff(xs, dim=1))
        parts = []
        for i, d in enumerate(params["dilations"].tolist()):
            for r in range(reps):
                u = series[r]
                w = params["weights"][i, r].to(u).reshape(half * k, 1, KERNEL_LENGTH)
                if u.shape[2] == 1:  # one channel: every group convolves it
                    z = F.conv1d(u.transpose(1, 2), w, dilation=d, padding=(KERNEL_LENGTH - 1) * d // 2)
                else:
                    summed = torch.einsum("nlc,gc->ngl", u, params["channels"][i, r].to(u))  # (n, g/2, L_r)
                    z = F.conv1d(summed, w, dilation=d, padding=(KERNEL_LENGTH - 1) * d // 2, groups=half)
                z = z.reshape(n, half, k, u.shape[1])
                top, top_at = z.max(2)
                low_at = z.min(2).indices  # (torch's argmin is slower; both give the first of equal values)
                soft_max = u.new_zeros(n, half, k).scatter_add_(2, top_at, top)
                hard_min = u.new_zeros(n, half, k).scatter_add_(2, low_at, torch.ones_like(top))
                parts += [soft_max.reshape(n, -1), hard_min.reshape(n, -1)]
        rows.append(torch.cat(parts, 1))
    return torch.cat(rows) if rows else x.new_zeros(0, n_output_features(params))


def sparse_scaling(feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mu, scale)`` of training features ``(n, P)`` for :func:`sparse_scaled` (module docstring): the mean and
    ``sigma + p0^4 + 1e-8`` of ``sqrt(max(f, 0))``."""
    s = feats.clamp_min(0).sqrt()
    zeros = (s == 0).to(s.dtype).mean(0)
    return s.mean(0), s.std(0) + zeros**4 + 1e-8


def sparse_scaled(feats: torch.Tensor, mean: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``(sqrt(max(f, 0)) - mu) / scale`` where the root is not 0, and 0 where it is."""
    s = feats.clamp_min(0).sqrt()
    return torch.where(s != 0, (s - mean) / scale, torch.zeros_like(s))


def hydra_transform_ref(x, params: dict[str, torch.Tensor]) -> np.ndarray:
    """The same features by explicit loops over series, dilations, groups, time steps, kernels and taps (float64
    numpy; slow)."""
    x = np.asarray(x, dtype=np.float64)
    W = params["weights"].double().cpu().numpy()
    sel = params["channels"].cpu().numpy()
    D, reps, half, k, _ = W.shape
    out = []
    for n in range(len(x)):
        series = (x[n], x[n, 1:] - x[n, :-1])
        row = []
        for i, d in enumerate(params["dilations"].tolist()):
            pad = (KERNEL_LENGTH - 1) * d // 2
            for r in range(reps):
                u = series[r] @ sel[i, r].T  # (L_r, g/2): each group's sum
                soft_max, hard_min = np.zeros((half, k)), np.zeros((half, k))
                for g in range(half):
                    for t in range(len(u)):
                        resp = []
                        for j in range(k):
                            s = 0.0
                            for tap in range(KERNEL_LENGTH):
                                src = t - pad + tap * d
                                if 0 <= src < len(u):
                                    s += W[i, r, g, j, tap] * u[src, g]
                            resp.append(s)
                        top = max(range(k), key=lambda j: (resp[j], -j))  # the first of the largest
                        low = min(range(k), key=lambda j: (resp[j], j))  # the first of the smallest
                        soft_max[g, top] += resp[top]
                        hard_min[g, low] += 1.0
                row += [soft_max.ravel(), hard_min.ravel()]
        out.append(np.concatenate(row))
    return np.stack(out)
