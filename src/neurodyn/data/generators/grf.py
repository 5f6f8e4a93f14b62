"""Gaussian random fields on [0, 1]^d with covariance sigma^2 (-Laplacian + tau^2 I)^(-alpha).

Karhunen-Loeve sampling in the Laplacian's eigenbasis:

    f(x) = sum_k  sigma * (lambda_k + tau^2)^(-alpha/2) * xi_k * phi_k(x),     xi_k ~ N(0, 1)

* ``boundary="neumann"`` (the FNO Darcy benchmark): phi_k = prod_i c_{k_i} cos(pi k_i x_i) with
  c_0 = 1, c_k = sqrt(2) (orthonormal on [0,1]), lambda_k = pi^2 |k|^2, k_i = 0..K-1, and the
  constant mode removed (zero mean), as FNO's GRF.m does through an inverse DCT.
* ``boundary="periodic"``: phi_k = exp(2 pi i k.x) on the torus, lambda_k = 4 pi^2 |k|^2, mean zero,
  real field (the Navier-Stokes initial vorticity).

Evaluated directly at arbitrary grid points by a (modes x points) matrix per axis, so a field is
the same function whatever resolution it is sampled at (given the same modes).
"""

from __future__ import annotations

import math

import torch


def neumann_grf_2d(
    xi: torch.Tensor, x: torch.Tensor, y: torch.Tensor, alpha: float, tau: float, sigma: float | None = None
) -> torch.Tensor:
    """Cosine-series GRF samples.

    Args:
        xi: (B, K1, K2) standard normal coefficients (the [0, 0] entry is ignored: zero mean).
        x, y: (H,), (W,) evaluation points in [0, 1].
        alpha, tau: smoothness and inverse length scale; ``sigma`` defaults to tau^(alpha-1), which
            gives the covariance tau^(2 alpha - 2) (-Laplacian + tau^2)^(-alpha) of FNO's Darcy data.
    Returns:
        (B, H, W) field values.
    """
    if sigma is None:
        sigma = tau ** (alpha - 1)
    k1 = torch.arange(xi.shape[1], dtype=xi.dtype, device=xi.device)
    k2 = torch.arange(xi.shape[2], dtype=xi.dtype, device=xi.device)
    lam = math.pi**2 * (k1[:, None] ** 2 + k2[None, :] ** 2)
    coef = sigma * (lam + tau**2) ** (-alpha / 2)
    coef[0, 0] = 0.0
    phi_x = _cos_basis(k1, x.to(xi))  # (K1, H)
    phi_y = _cos_basis(k2, y.to(xi))  # (K2, W)
    return torch.einsum("kh,bkl,lw->bhw", phi_x, coef * xi, phi_y)


def _cos_basis(k: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    scale = torch.where(k == 0, torch.ones_like(k), torch.full_like(k, math.sqrt(2.0)))
    return scale[:, None] * torch.cos(math.pi * k[:, None] * x[None, :])


def periodic_grf_2d(xi: torch.Tensor, s: int, alpha: float, tau: float, sigma: float) -> torch.Tensor:
    """Periodic GRF on an s x s grid of the unit torus (points j/s), via an inverse real FFT.

    Args:
        xi: (B, s, s, 2) standard normals (real and imaginary parts of the Fourier coefficients).
    Returns:
        (B, s, s) real field with covariance sigma^2 (4 pi^2 (-Laplacian/(4 pi^2))... ) i.e.
        E|f_k|^2 proportional to sigma^2 (4 pi^2 |k|^2 + tau^2)^(-alpha), zero mean.
    """
    k = torch.fft.fftfreq(s, d=1.0 / s).to(xi)
    kk = k[:, None] ** 2 + k[None, :] ** 2
    sqrt_eig = sigma * (4 * math.pi**2 * kk + tau**2) ** (-alpha / 2)
    sqrt_eig[0, 0] = 0.0
    coeff = s * s * sqrt_eig * torch.complex(xi[..., 0], xi[..., 1]) / math.sqrt(2.0)
    # Taking the real part of the full inverse FFT symmetrises the spectrum (Hermitian projection).
    return torch.fft.ifft2(coeff).real * math.sqrt(2.0)
