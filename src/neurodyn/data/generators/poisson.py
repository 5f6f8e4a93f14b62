"""2-D Poisson with a random sine-series source, the CNO benchmark used by CHONN (Fig. 4g).

    -Laplacian u = f  on D = [0, 1]^2,   u = 0 on the boundary,

    f(x, y) = (pi / K^2)       sum_{i,j=1..K} a_ij (i^2 + j^2)^r       sin(pi i x) sin(pi j y),
    u(x, y) = (1 / (pi K^2))   sum_{i,j=1..K} a_ij (i^2 + j^2)^(r - 1) sin(pi i x) sin(pi j y),

with a_ij ~ U[-1, 1] i.i.d. (Raonic et al. 2023, "Convolutional Neural Operators", Poisson benchmark;
K = 16 in distribution, K = 20 for the out-of-distribution test set, r = -0.5, 64 x 64). The second line
is the exact solution because -Laplacian[sin(pi i x) sin(pi j y)] = pi^2 (i^2 + j^2) sin(pi i x) sin(pi j y).

Exponent convention (a choice; see the report). We follow CNO, whose source carries (i^2 + j^2)^r with
r = -0.5 (coefficients decaying like 1/|k|). CHONN's Eq. (58) prints (i^2 + j^2)^(-r) with r = -0.5,
i.e. a source whose coefficients *grow* like |k|; since CHONN states it uses CNO's data files
(PoissonData_64x64_IN/OUT.h5), we take that as a typo. ``r=0.5`` reproduces the literal reading.

Grid: ``include_boundary=True`` (default) stores the vertex grid x_p = p / (s - 1), p = 0..s-1, which
contains the boundary nodes (CNO's loaders build their coordinate grid as linspace(0, 1, s)); u and f
are then exactly 0 on the outer rows and columns. ``include_boundary=False`` stores the s x s interior
nodes x_p = p / (s + 1), p = 1..s. A sine mode sin(pi i x) is resolved (not aliased to another mode
or to zero) on these nodes only for i <= s - 2 (vertex grid) or i <= s (interior grid), so K must
satisfy that bound.

Solvers:
  * ``solver="exact"`` (default) evaluates the series for u.
  * ``solver="fd"`` solves the 5-point finite-difference system -Laplacian_h u = f on the same nodes
    (second order, error O(h^2 K^4)-ish; about 3 % for K = 16 at 64 x 64), diagonalised exactly by the
    type-I discrete sine transform: sin(pi p q / (n + 1)) are the eigenvectors of the 1-D Dirichlet
    second difference with eigenvalues (2 - 2 cos(pi q / (n + 1))) / h^2.

Stored per sample: ``fields/f`` (s, s, 1) input, ``fields/u`` (s, s, 1) target, ``params/a`` (K, K)
the coefficients a_ij (row i = x-mode, column j = y-mode). Array axis 0 is x, axis 1 is y
(``coords/x``, ``coords/y``). Computation in float64, storage float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import ConfigError
from .base import Generator, as_numpy, register_generator, sample_rng


@dataclass
class PoissonConfig:
    resolution: int = 64  # stored nodes per side
    K: int = 16  # modes per axis in the source (16 in distribution, 20 out of distribution)
    r: float = -0.5  # source coefficients carry (i^2 + j^2)^r (CNO convention)
    solver: str = "exact"  # exact | fd
    include_boundary: bool = True  # vertex grid with boundary nodes (True) or interior nodes only


R_BOUND = 10.0


def poisson_nodes(resolution: int, include_boundary: bool = True, dtype=torch.float64, device=None) -> torch.Tensor:
    """(s,) node coordinates: p/(s-1), p = 0..s-1 (with boundary) or p/(s+1), p = 1..s (interior)."""
    p = torch.arange(resolution, dtype=dtype, device=device)
    return p / (resolution - 1) if include_boundary else (p + 1) / (resolution + 1)


def sine_series(coef: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """sum_{i,j} coef[b, i-1, j-1] sin(pi i x) sin(pi j y) at the tensor grid (x, y): (B, len(x), len(y))."""
    k = coef.shape[-1]
    modes = torch.arange(1, k + 1, dtype=x.dtype, device=x.device)
    sx = torch.sin(math.pi * x[:, None] * modes[None, :])  # (H, K)
    sy = torch.sin(math.pi * y[:, None] * modes[None, :])  # (W, K)
    return torch.einsum("hi,bij,wj->bhw", sx, coef, sy)


def poisson_series(a: torch.Tensor, r: float, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Source f and exact solution u of the CNO Poisson problem for coefficients ``a`` (B, K, K)."""
    k = a.shape[-1]
    modes = torch.arange(1, k + 1, dtype=a.dtype, device=a.device)
    lam = modes[:, None] ** 2 + modes[None, :] ** 2  # i^2 + j^2
    f = sine_series(a * lam**r, x, y) * (math.pi / k**2)
    u = sine_series(a * lam ** (r - 1), x, y) / (math.pi * k**2)
    return f, u


def fd_poisson_dirichlet(f: torch.Tensor, h: float) -> torch.Tensor:
    """Solve the 5-point system -(u_E + u_W + u_N + u_S - 4 u_P) / h^2 = f on an n x n block of interior
    nodes with u = 0 on the surrounding boundary; ``f``: (B, n, n). Exact (to round-off) DST-I
    diagonalisation, batched, any device."""
    n = f.shape[-1]
    if f.shape[-2] != n:
        raise ConfigError(f"fd_poisson_dirichlet needs a square block of nodes, got shape {tuple(f.shape)}")
    q = torch.arange(1, n + 1, dtype=f.dtype, device=f.device)
    s = torch.sin(math.pi * q[:, None] * q[None, :] / (n + 1)) * math.sqrt(2.0 / (n + 1))  # orthogonal, symmetric
    lam = (2.0 - 2.0 * torch.cos(math.pi * q / (n + 1))) / h**2
    fh = s @ f @ s
    return s @ (fh / (lam[:, None] + lam[None, :])) @ s


@register_generator
class PoissonGenerator(Generator, name="poisson", config=PoissonConfig, inputs=("f",), targets=("u",), chunk_size=256):
    field_labels = {"f": "source", "u": "solution"}

    def validate(self, cfg: PoissonConfig) -> None:
        if cfg.solver not in ("exact", "fd"):
            raise ConfigError(f"poisson solver must be 'exact' or 'fd', got {cfg.solver!r}")
        low = 3 if cfg.include_boundary else 1
        if cfg.resolution < low:
            raise ConfigError(
                f"poisson resolution must be >= {low} with include_boundary={cfg.include_boundary}, "
                f"got {cfg.resolution}"
            )
        if cfg.K < 1:
            raise ConfigError(f"poisson K (modes per axis) must be >= 1, got {cfg.K}")
        k_max = cfg.resolution - 2 if cfg.include_boundary else cfg.resolution
        if cfg.K > k_max:
            raise ConfigError(
                f"poisson K={cfg.K} is not resolved on {cfg.resolution} nodes per side "
                f"(include_boundary={cfg.include_boundary}): sine modes alias above i = {k_max}; "
                f"expected K <= {k_max} or a larger resolution"
            )
        if not (math.isfinite(cfg.r) and -R_BOUND <= cfg.r <= R_BOUND):
            raise ConfigError(
                f"poisson r must lie in [-{R_BOUND:g}, {R_BOUND:g}], got {cfg.r}: beyond that the "
                "weights (i^2+j^2)^r span more than float32 can hold and one mode swamps the rest"
            )

    def tag(self, cfg: PoissonConfig) -> str:
        return f"r{cfg.resolution}_K{cfg.K}" + ("_fd" if cfg.solver == "fd" else "")

    def coords(self, cfg: PoissonConfig) -> dict[str, np.ndarray]:
        x = poisson_nodes(cfg.resolution, cfg.include_boundary).numpy()
        return {"x": x, "y": x.copy()}

    def coefficients(self, cfg: PoissonConfig, ids, seed: int) -> torch.Tensor:
        """(B, K, K) float64 a_ij ~ U[-1, 1], drawn on CPU from each sample's own generator."""
        return torch.stack(
            [torch.rand(cfg.K, cfg.K, generator=sample_rng(seed, int(i)), dtype=torch.float64) * 2 - 1 for i in ids]
        )

    def generate(self, cfg: PoissonConfig, ids, seed, device):
        device = torch.device(device)
        a = self.coefficients(cfg, ids, seed).to(device)
        x = poisson_nodes(cfg.resolution, cfg.include_boundary, device=device)
        f, u = poisson_series(a, cfg.r, x, x)
        if cfg.solver == "fd":
            h = 1.0 / (cfg.resolution - 1) if cfg.include_boundary else 1.0 / (cfg.resolution + 1)
            u = torch.zeros_like(f)
            if cfg.include_boundary:
                u[:, 1:-1, 1:-1] = fd_poisson_dirichlet(f[:, 1:-1, 1:-1], h)
            else:
                u = fd_poisson_dirichlet(f, h)
        if cfg.include_boundary:  # sin(pi * 1.0) is 1.2e-16, not 0: make the boundary exactly homogeneous
            for t in (f, u):
                t[:, 0, :] = t[:, -1, :] = t[:, :, 0] = t[:, :, -1] = 0.0
        return {"fields/f": as_numpy(f)[..., None], "fields/u": as_numpy(u)[..., None], "params/a": as_numpy(a)}
