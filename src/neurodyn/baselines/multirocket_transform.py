"""MultiRocket features (Tan, Dempster, Bergmeir & Webb, "MultiRocket: multiple pooling operators and
transformations for fast and effective time series classification", DMKD 2022), for series ``x (N, L, C)``.

As the paper describes it, MultiRocket is MiniRocket's convolutions (:mod:`.minirocket_transform`: the 84 fixed
kernels of length 9, the exponentially spaced dilations, the alternating padding, the biases drawn from the
convolution outputs of random training series at low-discrepancy quantiles, the channel subsets of a multivariate
series) applied to **two representations**, the series ``x`` and its first difference ``x'_t = x_{t+1} - x_t``
(``L - 1`` steps; its own dilations, channel subsets and biases, fitted on the differenced training series), with
**four pooling operators** on each convolution output instead of one. With ``z_j = (W * x)_j - b`` over the ``m``
positions a kernel counts (all ``L`` with padding, the ``L - 8 d`` where it fits without), and ``J = {j : z_j > 0}``:

* ``PPV = |J| / m``, the proportion of positive values (MiniRocket's one feature);
* ``MPV = (1 / |J|) sum_{j in J} z_j``, the mean of the positive values (0 when ``J`` is empty);
* ``MIPV = (1 / |J|) sum_{j in J} j``, the mean index of the positive values, ``j = 0 .. m - 1`` counted from the
  first counted position (-1 when ``J`` is empty);
* ``LSPV``, the length of the longest stretch of consecutive positive values (0 when ``J`` is empty).

The paper's default: 50,000 features requested, ``n_features // 8`` per representation made into kernels as
MiniRocket does (``84 * (6,250 // 84) = 6,216``), each giving the four features: ``2 x 4 x 6,216 = 49,728``
features. The draws of each representation come from ``torch.Generator().manual_seed(2 seed)`` (the series) and
``2 seed + 1`` (its difference), so a fit is a function of the training data and the seed.

:func:`multirocket_transform_ref` computes the same features by explicit loops over series, kernels, positions and
taps (the test oracle). Layout of a feature vector: ``(representation, operator, feature)``, the operators in the
order of :data:`POOLING` and the features in MiniRocket's order (dilation, kernel, bias).
"""

from __future__ import annotations

import numpy as np
import torch

from .minirocket_transform import KERNEL_LENGTH, N_KERNELS, convolve, kernel_weights, minirocket_fit

POOLING = ("ppv", "mpv", "mipv", "lspv")
REPRESENTATIONS = ("series", "difference")
MIN_LENGTH = KERNEL_LENGTH + 1  # the difference has L - 1 steps, at least the kernel's length


def features_per_representation(n_features: int) -> int:
    """The features requested of each representation's MiniRocket kernels: ``n_features // 8``."""
    return n_features // (len(REPRESENTATIONS) * len(POOLING))


def multirocket_fit(
    x: torch.Tensor, n_features: int = 50_000, max_dilations: int = 32, seed: int = 0
) -> dict[str, torch.Tensor]:
    """Fit the transform on training series ``x (N, L, C)`` (``L >= 10``). Returns MiniRocket's parameters of the
    series (``dilations``, ``per_dilation``, ``channels``, ``biases``: :func:`~.minirocket_transform.minirocket_fit`
    with ``n_features // 8`` features) and the same of its difference, prefixed ``diff_``."""
    if x.dim() != 3 or x.shape[1] < MIN_LENGTH or len(x) == 0:
        raise ValueError(
            f"multirocket_fit takes series (N, L, C) with N >= 1 and L >= {MIN_LENGTH}; got {tuple(x.shape)}"
        )
    per = features_per_representation(n_features)
    series = minirocket_fit(x, per, max_dilations, seed=2 * int(seed))
    diff = minirocket_fit(torch.diff(x, dim=1), per, max_dilations, seed=2 * int(seed) + 1)
    return {**series, **{f"diff_{k}": v for k, v in diff.items()}}


def n_output_features(params: dict[str, torch.Tensor]) -> int:
    """Features per series: ``4 x`` the biases of both representations."""
    return len(POOLING) * (len(params["biases"]) + len(params["diff_biases"]))


def _pooled(conv: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``conv (n, K, m)`` (the counted positions) and ``bias (K, f)`` -> ``(n, K, f, 4)``: PPV, MPV, MIPV, LSPV."""
    m = conv.shape[-1]
    z = conv[:, :, None, :] - bias[None, :, :, None]  # (n, K, f, m)
    pos = z > 0
    count = pos.sum(-1)
    denom = count.clamp_min(1).to(conv.dtype)
    ppv = count.to(conv.dtype) / m
    mpv = z.clamp_min(0).sum(-1) / denom  # 0 where nothing is positive
    index = torch.arange(m, device=conv.device, dtype=conv.dtype)
    mipv = torch.where(count > 0, (pos.to(conv.dtype) @ index) / denom, torch.full_like(ppv, -1.0))
    run_end = pos.cumsum(-1, dtype=torch.int32)  # positives so far
    reset = torch.where(pos, torch.zeros_like(run_end), run_end).cummax(-1).values
    lspv = (run_end - reset).amax(-1).to(conv.dtype)  # the longest run of positives
    return torch.stack([ppv, mpv, mipv, lspv], -1)


def _representation(
    x: torch.Tensor,
    dilations: list[int],
    per_dilation: list[int],
    channels: torch.Tensor,
    biases: torch.Tensor,
    chunk_elements: int,
) -> torch.Tensor:
    """``(N, 4, 84 * sum(per_dilation))``: the four features of every (dilation, kernel, bias) of one
    representation ``x (N, L, C)``."""
    N, L, _ = x.shape
    out = x.new_zeros(N, len(POOLING), len(biases))
    at = 0
    for i, (d, nf) in enumerate(zip(dilations, per_dilation)):
        bias = biases[at : at + N_KERNELS * nf].reshape(N_KERNELS, nf).to(x)
        pad = (KERNEL_LENGTH - 1) * d // 2
        padded = torch.tensor([(i + k) % 2 == 0 for k in range(N_KERNELS)], device=x.device)
        step = max(1, chunk_elements // max(1, N_KERNELS * L * nf))
        for lo in range(0, N, step):
            conv = convolve(x[lo : lo + step], d, channels[i])  # (n, 84, L)
            pooled = conv.new_empty(len(conv), N_KERNELS, nf, len(POOLING))
            pooled[:, padded] = _pooled(conv[:, padded], bias[padded])
            pooled[:, ~padded] = _pooled(conv[:, ~padded, pad : L - pad], bias[~padded])
            out[lo : lo + step, :, at : at + N_KERNELS * nf] = pooled.permute(0, 3, 1, 2).reshape(len(conv), 4, -1)
        at += N_KERNELS * nf
    return out


def multirocket_transform(
    x: torch.Tensor, params: dict[str, torch.Tensor], chunk_elements: int = 1 << 22
) -> torch.Tensor:
    """Features ``(N, 8 * 84 * sum(per_dilation))`` of ``x (N, L, C)`` (the fitted length) under ``params``
    (module docstring: layout ``(representation, operator, feature)``), in ``x``'s dtype. ``chunk_elements``: about
    the most elements of one ``(series, kernel, bias, position)`` block held at once."""
    parts = []
    for prefix, series in (("", x), ("diff_", torch.diff(x, dim=1))):
        parts.append(
            _representation(
                series,
                params[prefix + "dilations"].tolist(),
                params[prefix + "per_dilation"].tolist(),
                params[prefix + "channels"],
                params[prefix + "biases"],
                chunk_elements,
            ).reshape(len(x), -1)
        )
    return torch.cat(parts, 1)


def pooled_ref(z) -> list[float]:
    """PPV, MPV, MIPV and LSPV of one convolution output less its bias, ``z`` (a sequence), by a plain loop."""
    positive = [(j, v) for j, v in enumerate(z) if v > 0]
    longest = run = 0
    for v in z:
        run = run + 1 if v > 0 else 0
        longest = max(longest, run)
    if not positive:
        return [0.0, 0.0, -1.0, 0.0]
    return [
        len(positive) / len(z),
        sum(v for _, v in positive) / len(positive),
        sum(j for j, _ in positive) / len(positive),
        float(longest),
    ]


def multirocket_transform_ref(x, params: dict[str, torch.Tensor]) -> np.ndarray:
    """The same features by explicit loops over series, representations, kernels, positions and taps (float64
    numpy; slow)."""
    x = np.asarray(x, dtype=np.float64)
    N = len(x)
    W = kernel_weights().numpy().astype(np.float64)
    blocks = []
    for prefix, series in (("", x), ("diff_", x[:, 1:] - x[:, :-1])):
        L, C = series.shape[1:]
        biases = params[prefix + "biases"].double().cpu().numpy()
        feats = np.zeros((N, len(POOLING), len(biases)))
        col = 0
        for i, (d, nf) in enumerate(
            zip(params[prefix + "dilations"].tolist(), params[prefix + "per_dilation"].tolist())
        ):
            sel = params[prefix + "channels"][i].cpu().numpy()
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
                                s += W[k, tap] * sum(series[n, src, c] for c in chans)
                        conv.append(s)
                    for f in range(nf):
                        feats[n, :, col + f] = pooled_ref([v - biases[col + f] for v in conv])
                col += nf
        blocks.append(feats.reshape(N, -1))
    return np.concatenate(blocks, 1)
