"""MiniRocket features (Dempster, Schmidt & Webb, "MiniRocket", KDD 2021), for series ``x (N, L, C)``.

The transform, as the paper describes it:

* **Kernels**: the 84 kernels of length 9 whose weights are -1 except three positions of weight 2 (every choice of
  3 positions out of 9, in lexicographic order); each sums to 0, so the output where a kernel fits
  does not depend on the series' offset.
* **Dilations**: ``floor(2^e)`` for ``max_dilations`` exponents ``e`` evenly spaced in
  ``[0, log2((L - 1) / 8)]`` (the receptive field ``8 d + 1`` never exceeds the series), duplicates merged; each
  dilation gets features in proportion to how often it occurred, ``n_features // 84`` per kernel in all.
* **Padding**: kernel ``k`` at dilation index ``i`` convolves the zero-padded series ("same" length) when
  ``i + k`` is even, and only the positions where it fits entirely otherwise.
* **Biases**: for each (dilation, kernel), the convolution output of one training series drawn at random, at the
  quantiles ``(j * phi) mod 1`` (``phi`` the golden ratio, ``j = 1, 2, ...`` over all features in order): a
  low-discrepancy spread of quantiles.
* **Multivariate series**: each (dilation, kernel) sums its convolutions over ``floor(2^u)`` channels,
  ``u ~ U(0, log2(min(C, 9) + 1))``, drawn without replacement (the paper's multivariate variant).
* **Feature**: the proportion of positive values (PPV), the fraction of positions where the output exceeds the bias.

The draws (series of each bias, channel subsets) come from ``torch.Generator().manual_seed(seed)``, so a fit is a
function of the training data and the seed, on every device. :func:`minirocket_transform_ref` computes the
same features by explicit loops (the test oracle).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
import torch.nn.functional as F

KERNEL_LENGTH = 9
N_KERNELS = 84
PHI = (math.sqrt(5.0) + 1.0) / 2.0


def kernel_weights() -> torch.Tensor:
    """The 84 kernels ``(84, 9)``: -1, with 2 at each choice of three positions."""
    w = torch.full((N_KERNELS, KERNEL_LENGTH), -1.0)
    for k, idx in enumerate(itertools.combinations(range(KERNEL_LENGTH), 3)):
        w[k, list(idx)] = 2.0
    return w


def fit_dilations(length: int, n_features: int, max_dilations: int) -> tuple[list[int], list[int]]:
    """The dilations of series of ``length`` steps and the features per kernel each gets (module docstring)."""
    per_kernel = max(1, n_features // N_KERNELS)
    true_max = min(per_kernel, max_dilations)
    multiplier = per_kernel / true_max
    max_exponent = max(0.0, math.log2((length - 1) / (KERNEL_LENGTH - 1)))
    values = np.floor(2.0 ** np.linspace(0.0, max_exponent, true_max)).astype(np.int64)
    dilations, counts = np.unique(values, return_counts=True)
    per_dilation = (counts * multiplier).astype(np.int64)
    i = 0
    while per_dilation.sum() < per_kernel:  # the remainder, one feature at a time from the smallest dilation
        per_dilation[i] += 1
        i = (i + 1) % len(per_dilation)
    return dilations.tolist(), per_dilation.tolist()


def quantiles(n: int) -> torch.Tensor:
    """``(j * phi) mod 1`` for ``j = 1..n`` (float64)."""
    j = torch.arange(1, n + 1, dtype=torch.float64)
    return torch.remainder(j * PHI, 1.0)


def convolve(x: torch.Tensor, dilation: int, channels: torch.Tensor) -> torch.Tensor:
    """``x (N, L, C)`` -> ``(N, 84, L)``: each kernel at ``dilation`` over the zero-padded series, summed over its
    channels (``channels (84, C)``, 0/1)."""
    N, L, C = x.shape
    w = kernel_weights().to(x)[:, None, :]
    pad = (KERNEL_LENGTH - 1) * dilation // 2
    per_channel = F.conv1d(x.permute(0, 2, 1).reshape(N * C, 1, L), w, padding=pad, dilation=dilation)
    return torch.einsum("nckl,kc->nkl", per_channel.reshape(N, C, N_KERNELS, L), channels.to(x))


def _convolve_each(xe: torch.Tensor, dilation: int, channels: torch.Tensor) -> torch.Tensor:
    """``xe (84, L, C)`` -> ``(84, L)``: kernel ``k`` on series ``k`` only (a grouped convolution)."""
    K, L, C = xe.shape
    w = kernel_weights().to(xe).repeat_interleave(C, 0)[:, None, :]  # (84 C, 1, 9)
    pad = (KERNEL_LENGTH - 1) * dilation // 2
    out = F.conv1d(xe.permute(0, 2, 1).reshape(1, K * C, L), w, padding=pad, dilation=dilation, groups=K * C)
    return (out.reshape(K, C, L) * channels.to(xe)[..., None]).sum(1)


def minirocket_fit(
    x: torch.Tensor, n_features: int = 10_000, max_dilations: int = 32, seed: int = 0
) -> dict[str, torch.Tensor]:
    """Fit the transform on training series ``x (N, L, C)`` (``L >= 9``). Returns the tensors that define it:
    ``dilations (D,)``, ``per_dilation (D,)`` (features per kernel), ``channels (D, 84, C)`` (0/1) and
    ``biases (84 * sum(per_dilation),)``, ordered by dilation, kernel, feature."""
    if x.dim() != 3 or x.shape[1] < KERNEL_LENGTH or len(x) == 0:
        raise ValueError(
            f"minirocket_fit takes series (N, L, C) with N >= 1 and L >= {KERNEL_LENGTH}; got {tuple(x.shape)}"
        )
    N, L, C = x.shape
    gen = torch.Generator().manual_seed(int(seed))
    dilations, per_dilation = fit_dilations(L, n_features, max_dilations)
    q = quantiles(N_KERNELS * sum(per_dilation))
    max_exponent = math.log2(min(C, KERNEL_LENGTH) + 1)
    channels, biases, at = [], [], 0
    for d, nf in zip(dilations, per_dilation):
        sel = torch.zeros(N_KERNELS, C)
        for k in range(N_KERNELS):
            n_ch = int(2.0 ** (torch.rand((), generator=gen, dtype=torch.float64).item() * max_exponent))
            sel[k, torch.randperm(C, generator=gen)[: max(1, min(n_ch, C))]] = 1.0
        example = torch.randint(N, (N_KERNELS,), generator=gen)
        rows = _convolve_each(x[example.to(x.device)], d, sel.to(x.device)).double()  # kernel k on example k
        qs = q[at : at + N_KERNELS * nf].reshape(N_KERNELS, nf).to(x.device)
        biases.append(torch.stack([torch.quantile(rows[k], qs[k]) for k in range(N_KERNELS)]).reshape(-1))
        channels.append(sel)
        at += N_KERNELS * nf
    return {
        "dilations": torch.tensor(dilations),
        "per_dilation": torch.tensor(per_dilation),
        "channels": torch.stack(channels).to(x.device),
        "biases": torch.cat(biases).to(x.dtype),
    }


def minirocket_transform(
    x: torch.Tensor, params: dict[str, torch.Tensor], chunk_elements: int = 1 << 25
) -> torch.Tensor:
    """PPV features ``(N, 84 * sum(per_dilation))`` of ``x (N, L, C)`` (the fitted length) under ``params``."""
    N, L, _ = x.shape
    at = 0
    feats = x.new_zeros(N, len(params["biases"]))
    for i, (d, nf) in enumerate(zip(params["dilations"].tolist(), params["per_dilation"].tolist())):
        bias = params["biases"][at : at + N_KERNELS * nf].reshape(N_KERNELS, nf).to(x)
        pad = (KERNEL_LENGTH - 1) * d // 2
        padded = torch.tensor([(i + k) % 2 == 0 for k in range(N_KERNELS)], device=x.device)
        inside = torch.zeros(L, dtype=torch.bool, device=x.device)
        inside[pad : L - pad] = True
        keep = (padded[:, None] | inside[None, :]).to(x.dtype)  # (84, L): positions each kernel counts
        step = max(1, chunk_elements // max(1, N_KERNELS * L * nf))
        for lo in range(0, N, step):
            conv = convolve(x[lo : lo + step], d, params["channels"][i])  # (n, 84, L)
            above = (conv[..., None] > bias[None, :, None, :]).to(x.dtype)  # (n, 84, L, nf)
            ppv = (above * keep[None, :, :, None]).sum(2) / keep.sum(1)[None, :, None]
            feats[lo : lo + step, at : at + N_KERNELS * nf] = ppv.reshape(len(conv), -1)
        at += N_KERNELS * nf
    return feats


def minirocket_transform_ref(x, params: dict[str, torch.Tensor]) -> np.ndarray:
    """The same features by explicit loops over series, kernels, positions and taps (float64 numpy; slow)."""
    x = np.asarray(x, dtype=np.float64)
    N, L, C = x.shape
    W = kernel_weights().numpy().astype(np.float64)
    biases = params["biases"].double().cpu().numpy()
    feats = np.zeros((N, len(biases)))
    col = 0
    for i, (d, nf) in enumerate(zip(params["dilations"].tolist(), params["per_dilation"].tolist())):
        sel = params["channels"][i].cpu().numpy()
        half = (KERNEL_LENGTH - 1) * d // 2
        for k in range(N_KERNELS):
            chans = [c for c in range(C) if sel[k, c]]
            positions = range(L) if (i + k) % 2 == 0 else range(half, L - half)
            for n in range(N):
                conv = []
                for p in positions:
                    s = 0.0
                    for tap in range(KERNEL_LENGTH):
                        src = p - half + tap * d
                        if 0 <= src < L:
                            s += W[k, tap] * sum(x[n, src, c] for c in chans)
                    conv.append(s)
                conv = np.asarray(conv)
                for f in range(nf):
                    feats[n, col + f] = np.mean(conv > biases[col + f])
            col += nf
    return feats
