"""Pseudo-spectral helpers shared by the periodic generators (Navier-Stokes on the torus, KS, ...).

Conventions: the periodic domain is [0, 1)^d sampled at the points j/n (j = 0..n-1); wavenumbers are
the integers k of the Fourier modes exp(2 pi i k x), laid out in torch.fft order (0, 1, ..., n/2 - 1,
-n/2, ..., -1) along a full axis and (0, 1, ..., n/2) along the last, halved axis of an rfft. The
physical derivative d/dx of mode k is multiplication by 2 pi i k.

Derivative wavenumbers zero the Nyquist mode k = -n/2 of an even n: its derivative is not a real
field (the mode cannot tell k from -k), and zeroing it is what the FNO Navier-Stokes solver's
"full complex FFT, keep the real part" does in effect. The Laplacian keeps the Nyquist mode
(k^2 is unambiguous).
"""

from __future__ import annotations

import torch


def fft_wavenumbers(n: int, device=None, dtype=torch.float64) -> torch.Tensor:
    """Integer wavenumbers (n,) of a full FFT axis, torch.fft order: 0..n/2-1, -n/2..-1 (n even)."""
    return torch.fft.fftfreq(n, d=1.0 / n, device=device, dtype=dtype)


def rfft_wavenumbers(n: int, device=None, dtype=torch.float64) -> torch.Tensor:
    """Integer wavenumbers (n // 2 + 1,) of the halved last axis of an rfft: 0..n/2."""
    return torch.fft.rfftfreq(n, d=1.0 / n, device=device, dtype=dtype)


def _zero_nyquist(k: torch.Tensor, n: int) -> torch.Tensor:
    if n % 2 == 0:
        k = torch.where(k.abs() == n // 2, torch.zeros_like(k), k)
    return k


def derivative_wavenumbers(n: int, rfft: bool = False, device=None, dtype=torch.float64) -> torch.Tensor:
    """Wavenumbers for spectral derivatives: as ``fft_wavenumbers``/``rfft_wavenumbers`` with the
    Nyquist mode (|k| = n/2, n even) set to 0."""
    k = rfft_wavenumbers(n, device, dtype) if rfft else fft_wavenumbers(n, device, dtype)
    return _zero_nyquist(k, n)


def rfft2_wavenumbers(n: int, device=None, dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """(kx (n, 1), ky (1, n//2+1)) for the rfft2 layout of an n x n field indexed [x, y]."""
    return fft_wavenumbers(n, device, dtype)[:, None], rfft_wavenumbers(n, device, dtype)[None, :]


def dealias_mask_2d(n: int, fraction: float = 2.0 / 3.0, device=None) -> torch.Tensor:
    """(n, n//2+1) bool rfft2 mask keeping |kx| <= fraction * n/2 and |ky| <= fraction * n/2.

    The square (per-axis) 2/3 rule of the FNO Navier-Stokes solver: with n = 256, |k_i| <= 85.
    """
    kx, ky = rfft2_wavenumbers(n, device)
    cut = fraction * (n // 2)
    return (kx.abs() <= cut) & (ky.abs() <= cut)


def max_dealiased_wavenumber(n: int, fraction: float = 2.0 / 3.0) -> int:
    """Largest integer wavenumber per axis kept by the dealiasing mask of an n-point axis."""
    return int(fraction * (n // 2) + 1e-12)


def _shell_positions(n: int):
    """For each mode of an n x n FFT grid (torch.fft order), its index in the shell-ordered draw."""
    import numpy as np

    half = n // 2
    k = np.arange(-half, half + 1)
    kx, ky = np.meshgrid(k, k, indexing="ij")
    kx, ky = kx.ravel(), ky.ravel()
    order = np.lexsort((ky, kx, np.maximum(np.abs(kx), np.abs(ky))))  # shell r, then kx, then ky
    pos = np.empty_like(order)
    pos[order] = np.arange(len(order))
    pos = pos.reshape(len(k), len(k))
    idx = np.fft.fftfreq(n, d=1.0 / n).astype(np.int64) + half  # grid wavenumbers -> rows of pos
    return torch.as_tensor(pos[np.ix_(idx, idx)].ravel())


_SHELL_CACHE: dict[int, torch.Tensor] = {}


def nested_normals_2d(generator: torch.Generator, n: int, channels: int = 2, dtype=torch.float64) -> torch.Tensor:
    """(n, n, channels) standard normals attached to the Fourier modes of an n x n grid (torch.fft
    order), drawn so that a mode gets the same numbers whatever the grid size n (even).

    The normals are drawn mode by mode in a fixed order of Z^2 -- by square shell max(|kx|, |ky|) = r,
    then kx, then ky -- for every mode with |kx|, |ky| <= n/2, i.e. (n + 1)^2 draws; a grid keeps
    its own modes. Hence a random field built from them on a coarse grid is the low-pass of the same
    field on a finer grid (except the coarse grid's Nyquist modes, which pair differently), and
    refining the simulation grid does not change the large scales of a sample.
    """
    if n % 2:
        raise ValueError(f"nested_normals_2d needs an even grid size, got {n}")
    if n not in _SHELL_CACHE:
        _SHELL_CACHE[n] = _shell_positions(n)
    draws = torch.randn((n + 1) ** 2, channels, generator=generator, dtype=dtype)
    return draws[_SHELL_CACHE[n]].reshape(n, n, channels)
