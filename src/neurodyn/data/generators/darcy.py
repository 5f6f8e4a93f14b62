"""2-D Darcy flow, the FNO benchmark: -div(a grad u) = f on [0,1]^2, u = 0 on the boundary.

The coefficient ``a`` is a thresholded (or exponentiated) Gaussian random field with covariance
tau^(2 alpha - 2) (-Laplacian + tau^2)^(-alpha), alpha = 2, tau = 3, sampled in the zero-Neumann cosine
basis (Li et al. 2021's GRF.m): a = a_pos where the field >= 0 and a_neg elsewhere (12 and 3 here,
as our benchmark specifies), or a = exp(field) with ``coefficient="lognormal"``.

The PDE is solved with the standard second-order 5-point finite-difference scheme on the vertex grid
x_i = i h, h = 1/(s-1), with face coefficients a_{i+1/2,j} = (a_ij + a_{i+1,j}) / 2 (``face_mean=
"arithmetic"``; ``"harmonic"`` is the flux-continuous alternative), by a sparse direct solve. The standard
protocol solves at 421 x 421 and keeps every 5th point (85 x 85): set ``resolution=85,
solve_resolution=421``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

from ...errors import ConfigError
from .base import Generator, check_positive, register_generator, sample_rng, solve_grid
from .grf import neumann_grf_2d


@dataclass
class DarcyConfig:
    resolution: int = 32  # stored grid points per side
    solve_resolution: int = 0  # grid the PDE is solved on (0: = resolution); must subsample exactly
    alpha: float = 2.0
    tau: float = 3.0
    n_modes: int = 0  # cosine modes per axis (0: = solve_resolution, as GRF.m)
    coefficient: str = "piecewise"  # piecewise | lognormal
    a_pos: float = 12.0
    a_neg: float = 3.0
    forcing: float = 1.0
    face_mean: str = "arithmetic"  # arithmetic | harmonic


def darcy_matrix(a: np.ndarray, face_mean: str = "arithmetic") -> sp.csr_matrix:
    """5-point matrix of -div(a grad .) on the (s-2)^2 interior nodes of an s x s vertex grid, h = 1/(s-1).

    Row of node (i, j): [ (aE + aW + aN + aS) u_ij - aE u_{i+1,j} - aW u_{i-1,j} - aN u_{i,j+1}
    - aS u_{i,j-1} ] / h^2 with face values aE = mean(a_ij, a_{i+1,j}) etc.; boundary values are 0.
    """
    s = a.shape[0]
    if a.shape != (s, s) or s < 3:
        raise ConfigError(f"Darcy coefficient must be a square grid of at least 3x3, got shape {a.shape}")
    h2 = (1.0 / (s - 1)) ** 2
    if face_mean == "arithmetic":
        fx = 0.5 * (a[1:, :] + a[:-1, :])  # faces between (i, j) and (i+1, j): (s-1, s)
        fy = 0.5 * (a[:, 1:] + a[:, :-1])  # faces between (i, j) and (i, j+1): (s, s-1)
    elif face_mean == "harmonic":
        fx = 2 * a[1:, :] * a[:-1, :] / (a[1:, :] + a[:-1, :])
        fy = 2 * a[:, 1:] * a[:, :-1] / (a[:, 1:] + a[:, :-1])
    else:
        raise ConfigError(f"face_mean must be 'arithmetic' or 'harmonic', got {face_mean!r}")
    n = s - 2
    aE, aW = fx[1:, 1:-1], fx[:-1, 1:-1]  # (n, n) each, for interior nodes
    aN, aS = fy[1:-1, 1:], fy[1:-1, :-1]
    idx = np.arange(n * n).reshape(n, n)
    rows = [idx.ravel()]
    cols = [idx.ravel()]
    vals = [(aE + aW + aN + aS).ravel()]
    for coef, di, dj in ((aE, 1, 0), (aW, -1, 0), (aN, 0, 1), (aS, 0, -1)):
        ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        ti, tj = ii + di, jj + dj
        keep = (ti >= 0) & (ti < n) & (tj >= 0) & (tj < n)
        rows.append(idx[keep])
        cols.append(idx[ti[keep], tj[keep]])
        vals.append(-coef[keep])
    m = sp.csr_matrix((np.concatenate(vals) / h2, (np.concatenate(rows), np.concatenate(cols))), shape=(n * n, n * n))
    return m


def solve_darcy(a: np.ndarray, f: np.ndarray | float = 1.0, face_mean: str = "arithmetic") -> np.ndarray:
    """Solve -div(a grad u) = f, u = 0 on the boundary; ``a``, ``f``: (s, s) nodal values. Returns u (s, s)."""
    a = np.asarray(a, dtype=np.float64)
    s = a.shape[0]
    rhs = np.broadcast_to(np.asarray(f, dtype=np.float64), (s, s))[1:-1, 1:-1].ravel()
    u = np.zeros((s, s))
    u[1:-1, 1:-1] = spla.spsolve(darcy_matrix(a, face_mean).tocsc(), rhs, permc_spec="MMD_AT_PLUS_A").reshape(
        s - 2, s - 2
    )
    return u


@register_generator
class DarcyGenerator(Generator, name="darcy", config=DarcyConfig, inputs=("a",), targets=("u",), chunk_size=50):
    field_labels = {"a": "permeability", "u": "solution"}

    def validate(self, cfg: DarcyConfig) -> None:
        solve_grid("darcy", cfg, 3, nodes=True)
        check_positive(cfg, "tau", "alpha", "a_pos", "a_neg")
        if cfg.coefficient not in ("piecewise", "lognormal"):
            raise ConfigError(f"darcy coefficient must be 'piecewise' or 'lognormal', got {cfg.coefficient!r}")
        if cfg.face_mean not in ("arithmetic", "harmonic"):
            raise ConfigError(f"darcy face_mean must be 'arithmetic' or 'harmonic', got {cfg.face_mean!r}")
        if cfg.n_modes < 0:
            raise ConfigError(f"darcy n_modes must be >= 0, got {cfg.n_modes}")

    def tag(self, cfg: DarcyConfig) -> str:
        fine = cfg.solve_resolution or cfg.resolution
        return f"r{cfg.resolution}" + (f"from{fine}" if fine != cfg.resolution else "")

    def coords(self, cfg: DarcyConfig) -> dict[str, np.ndarray]:
        x = np.linspace(0.0, 1.0, cfg.resolution)
        return {"x": x, "y": x.copy()}

    def coefficient(self, cfg: DarcyConfig, ids: np.ndarray, seed: int, device: torch.device) -> torch.Tensor:
        """(B, s_fine, s_fine) float64 coefficient fields on the solve grid."""
        fine = cfg.solve_resolution or cfg.resolution
        k = cfg.n_modes or fine
        xi = torch.stack([torch.randn(k, k, generator=sample_rng(seed, int(i)), dtype=torch.float64) for i in ids])
        grid = torch.linspace(0.0, 1.0, fine, dtype=torch.float64, device=device)
        field = neumann_grf_2d(xi.to(device), grid, grid, cfg.alpha, cfg.tau)
        if cfg.coefficient == "lognormal":
            return torch.exp(field)
        return torch.where(field >= 0, torch.full_like(field, cfg.a_pos), torch.full_like(field, cfg.a_neg))

    def generate(self, cfg: DarcyConfig, ids, seed, device):
        fine = cfg.solve_resolution or cfg.resolution
        stride = (fine - 1) // (cfg.resolution - 1)
        a = self.coefficient(cfg, ids, seed, device).cpu().numpy()
        u = np.stack([solve_darcy(ai, cfg.forcing, cfg.face_mean) for ai in a])
        sub = (slice(None), slice(None, None, stride), slice(None, None, stride))
        return {"fields/a": a[sub][..., None].astype(np.float32), "fields/u": u[sub][..., None].astype(np.float32)}
