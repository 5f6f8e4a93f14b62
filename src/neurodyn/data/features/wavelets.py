"""The bearing snapshots' features (the paper's preprocessing, Razzaq & Zhao's CARLE; NAC §3.5): a Morlet
continuous wavelet transform (:func:`morlet_cwt`) and, per axis of a vibration snapshot, its log10 CWT energy,
dominant CWT frequency (kHz), CWT spectral entropy, kurtosis, skewness, mean and std (:func:`snapshot_features`);
a run's 16 features add the operating hours and the temperature (:func:`run_features`).

The one copy of these features: the reader of the real PRONOSTIA / XJTU-SY files
(:mod:`neurodyn.data.formats.bearings`) and the synthetic ``bearing`` generator
(:mod:`neurodyn.data.generators.bearing`) both compute them here.
"""

from __future__ import annotations

import math

import numpy as np
import torch


def morlet_cwt(x: torch.Tensor, fs: float, freqs: torch.Tensor, w0: float = 6.0) -> torch.Tensor:
    """Complex Morlet CWT of ``x: (..., n)`` at ``freqs`` (Hz), by FFT: ``(..., n_freqs, n)``.

    Analytic Morlet, ``psi_hat(s w) = 2 exp(-(s w - w0)^2 / 2)`` for ``w > 0`` with scale
    ``s = w0 / (2 pi f)``, normalised so that ``A cos(2 pi f t)`` has modulus ``~A`` at frequency f.
    """
    n = x.shape[-1]
    X = torch.fft.fft(x.to(torch.float64), dim=-1)
    w = 2 * math.pi * torch.fft.fftfreq(n, d=1.0 / fs, dtype=torch.float64, device=x.device)
    s = w0 / (2 * math.pi * freqs.to(torch.float64))
    psi = 2.0 * torch.exp(-0.5 * (s[:, None] * w[None, :] - w0) ** 2) * (w > 0)
    return torch.fft.ifft(X[..., None, :] * psi, dim=-1)


def snapshot_features(signals: torch.Tensor | np.ndarray, fs: float, n_freqs: int = 24) -> torch.Tensor:
    """The 7 features per axis of snapshots ``(n, axes, points)`` (a tensor or an array) -> ``(n, 7 * axes)``."""
    freqs = torch.logspace(math.log10(fs / 256), math.log10(fs / 2.5), n_freqs, dtype=torch.float64)
    x = torch.as_tensor(signals).to(torch.float64)
    power = morlet_cwt(x, fs, freqs).abs().square().mean(-1)  # (n, axes, n_freqs)
    energy = torch.log10(power.sum(-1) + 1e-12)
    dominant = freqs[power.argmax(-1)] / 1000.0
    p = power / power.sum(-1, keepdim=True).clamp_min(1e-30)
    entropy = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)
    mean, std = x.mean(-1), x.std(-1, unbiased=False).clamp_min(1e-12)
    z = (x - mean[..., None]) / std[..., None]
    skew, kurt = z.pow(3).mean(-1), z.pow(4).mean(-1)
    feats = torch.stack([energy, dominant, entropy, kurt, skew, mean, std], -1)  # (n, axes, 7)
    return feats.reshape(len(x), -1).float()


def run_features(
    signals: torch.Tensor | np.ndarray, times_s: np.ndarray, temperature: np.ndarray | None, fs: float, n_freqs: int
) -> np.ndarray:
    """``(n, 16)``: 7 CWT/statistical features per axis, operating hours, temperature."""
    feats = snapshot_features(signals, fs, n_freqs).numpy()
    temp = np.zeros(len(times_s), dtype=np.float32) if temperature is None else np.asarray(temperature, np.float32)
    return np.concatenate([feats, (np.asarray(times_s) / 3600.0)[:, None], temp[:, None]], 1).astype(np.float32)


__all__ = ["morlet_cwt", "run_features", "snapshot_features"]
