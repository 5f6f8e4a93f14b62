"""Stress in a unit cell with a random void, a point-cloud benchmark in the spirit of Geo-FNO Elasticity.

Geo-FNO's Elasticity (Li et al. 2022, as recalled from the paper: not in this repo's sources): the unit
cell [0, 1]^2 with a void at its centre whose radius is r(theta) = 0.2 + 0.2 / (1 + exp(r~(theta))),
r~ a 1-D Gaussian random field N(0, 4^2 (-Laplacian + 3^2)^-1); incompressible Rivlin-Saunders material
(C1 = 1.863e5, C2 = 9.79e3); bottom edge fixed, traction t = (0, 100) on the top edge; the von Mises
stress at 972 mesh points is the target. Here the same geometry and load carry **linear elasticity**
(our choice), solved with scikit-fem. At this load the strains are 1e-4 to 1e-3 (stress
concentrations of up to ~10x the traction, over E ~ 1e6), so the hyperelastic response is essentially
the linear one with the initial shear modulus mu = 2 (C1 + C2) = 3.92e5; we take Poisson's ratio
0.45 (nearly incompressible, but below the locking limit of displacement elements) and
E = 2 mu (1 + nu) = 1.137e6. In plane strain (default; ``plane="stress"`` optional):

    -div(sigma(u)) = 0  in Omega = [0, 1]^2 minus the void,
    sigma = lambda tr(eps) I + 2 mu eps,   eps = (grad u + grad u^T) / 2,
    u = 0 on the bottom edge y = 0,   sigma n = (0, traction) on the top edge y = 1,
    sigma n = 0 on the two sides and on the void boundary,

lambda = E nu / ((1 + nu)(1 - 2 nu)) (plane strain) or E nu / (1 - nu^2) (plane stress), mu = E / (2 (1 + nu)).
The von Mises stress is sqrt(((sxx - syy)^2 + (syy - szz)^2 + (szz - sxx)^2) / 2 + 3 sxy^2) with
szz = lambda tr(eps) = nu (sxx + syy) in plane strain and 0 in plane stress. With the bottom fixed and
a traction load the stress does not depend on E (E only scales the displacement).

Void shape (our reading of Geo-FNO's prior): r~(theta) = c_0 + sum_{k=1..K} a_k cos(k theta) + b_k sin(k theta),
the Karhunen-Loeve expansion of the periodic field with covariance sigma^2 (-d^2/ds^2 + tau^2)^-1 in the
arc parameter s = theta / (2 pi) in [0, 1): c_0 = sigma/tau xi_0, a_k, b_k = sqrt(2) sigma
((2 pi k)^2 + tau^2)^-1/2 xi, xi ~ N(0, 1), truncated at K = ``n_modes`` modes;
r = r_min + (r_max - r_min) / (1 + exp(r~)), so r_min < r < r_max < 1/2 keeps the void inside the cell.
``params/radius_modes`` stores (c_0, a_1, b_1, ..., a_K, b_K).

Mesh (fixed topology, random geometry, so that every sample has the same P points). n_theta points
are spread uniformly by arc length over the square's boundary, starting at the corner (0, 0) and running
counter-clockwise (n_theta divisible by 4 puts the corners on nodes); each is joined to the point of
the void boundary at the same polar angle about the centre (1/2, 1/2), and the segment carries n_rings
nodes at fractions s_i = (i / (n_rings - 1))^grading from the void (i = 0) to the square (i = n_rings - 1).
The quadrilaterals between consecutive rings and rays are cut into triangles along alternating
diagonals; with the midpoints of the same mapping as extra nodes they are isoparametric P2 triangles
(curved void boundary, exact square boundary). Displacements are P2; the stress, piecewise smooth, is
L2-projected onto the continuous P1 space of the vertices (consistent mass matrix), component by
component, and the von Mises stress is evaluated from the projected components at the vertices.
P = n_theta * n_rings: 108 x 9 = 972 by default, Geo-FNO's count. The mesh is mirror symmetric about
x = 1/2 and y = 1/2 when n_theta is divisible by 8.

Stored per sample: ``fields/pos`` (P, 2) vertex coordinates, ring-major (ring 0 = the void boundary,
then outwards; within a ring, counter-clockwise from the ray to the corner (0, 0)), ``fields/sigma``
(P, 1) von Mises stress at them, ``params/radius_modes`` (2 n_modes + 1,). No ``coords``. Computation
in float64 on the CPU (scikit-fem/SciPy; ``device`` is not used), storage float32. Requires scikit-fem.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.sparse.linalg as spla
import torch

from ...errors import ConfigError, DataError
from .base import Generator, register_generator, sample_rng
from .pipe import StructuredP2Mesh, check_jacobian, import_skfem, structured_p2_mesh

CENTRE = 0.5


# --------------------------------------------------------------------------------------------------
# geometry
def square_boundary(n: int) -> np.ndarray:
    """(n, 2) points at arc length 4 k / n (k = 0..n-1) along the boundary of [0, 1]^2, anticlockwise from (0, 0)."""
    s = 4.0 * np.arange(n) / n
    side = np.minimum(np.floor(s).astype(int), 3)
    t = s - side
    x = np.choose(side, [t, np.ones_like(t), 1 - t, np.zeros_like(t)])
    y = np.choose(side, [np.zeros_like(t), t, np.ones_like(t), 1 - t])
    return np.stack([x, y], axis=1)


def radius_function(modes: np.ndarray, r_min: float, r_max: float) -> Callable[[np.ndarray], np.ndarray]:
    """theta -> r_min + (r_max - r_min) / (1 + exp(c0 + sum_k a_k cos k theta + b_k sin k theta))."""
    modes = np.asarray(modes, dtype=np.float64)
    k = np.arange(1, (len(modes) - 1) // 2 + 1)

    def r(theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=np.float64)
        g = modes[0] + (
            np.cos(np.multiply.outer(theta, k)) @ modes[1::2] + np.sin(np.multiply.outer(theta, k)) @ modes[2::2]
        )
        return r_min + (r_max - r_min) * 0.5 * (1 - np.tanh(g / 2))  # = 1 / (1 + e^g), overflow-free

    return r


def void_cell_grid(
    radius: Callable[[np.ndarray], np.ndarray], n_theta: int, n_rings: int, grading: float = 1.0
) -> np.ndarray:
    """Node grid (2 n_rings - 1, 2 n_theta, 2) of the cell with the void r = radius(theta): vertices at
    even indices, P2 midpoints in between; axis 0 from the void outwards, axis 1 counter-clockwise (periodic)."""
    square = square_boundary(2 * n_theta)
    outer = square - CENTRE
    theta = np.arctan2(outer[:, 1], outer[:, 0])
    inner = radius(theta)[:, None] * np.stack([np.cos(theta), np.sin(theta)], axis=1)
    s = (np.arange(2 * n_rings - 1) / (2 * n_rings - 2)) ** grading
    X = CENTRE + inner[None] + s[:, None, None] * (outer - inner)[None]
    X[-1] = square  # bit-exact cell boundary: the edges are found by x, y in {0, 1}
    return X


# --------------------------------------------------------------------------------------------------
# solver
def lame(youngs_modulus: float, poisson_ratio: float, plane: str = "strain") -> tuple[float, float]:
    """(lambda, mu) of the 2-D problem: plane strain, or plane stress (lambda* = E nu / (1 - nu^2))."""
    E, nu = youngs_modulus, poisson_ratio
    mu = E / (2 * (1 + nu))
    lam = E * nu / ((1 + nu) * (1 - 2 * nu)) if plane == "strain" else E * nu / (1 - nu**2)
    return lam, mu


class ElasticSolution(NamedTuple):
    displacement: np.ndarray  # (Hf, Wf, 2) at every grid node
    stress: np.ndarray  # (Hv, Wv, 4) sxx, syy, sxy, szz at the vertices (L2 projection onto P1)


def solve_linear_elasticity(
    g: StructuredP2Mesh,
    lam: float,
    mu: float,
    plane: str = "strain",
    fixed: np.ndarray | None = None,
    fixed_values: np.ndarray | None = None,
    traction_facets: np.ndarray | None = None,
    traction=(0.0, 0.0),
    what: str = "elasticity",
) -> ElasticSolution:
    """Linear elasticity on the structured P2 mesh ``g`` (isoparametric P2 displacements).

    ``fixed``: (Hf, Wf) bool, grid nodes whose displacement is prescribed to ``fixed_values``
    (Hf, Wf, 2) (zero if None); ``traction_facets``: scikit-fem facet indices loaded by the constant
    ``traction`` vector; every other boundary is traction-free. Returns the nodal displacement and
    the stress components projected onto P1 at the vertices (szz = lambda tr(eps) in plane strain,
    0 in plane stress).
    """
    skfem = import_skfem()
    from skfem.models.elasticity import linear_elasticity

    bu = skfem.Basis(g.mesh, skfem.ElementVector(skfem.ElementTriP2()), intorder=4)
    check_jacobian(bu, what)
    K = linear_elasticity(lam, mu).assemble(bu)
    f = np.zeros(bu.N)
    if traction_facets is not None and len(traction_facets):
        fb = skfem.FacetBasis(g.mesh, bu.elem, facets=traction_facets, intorder=4)
        t = np.asarray(traction, dtype=np.float64)

        @skfem.LinearForm
        def load(v, w):
            return t[0] * v[0] + t[1] * v[1]

        f += load.assemble(fb)
    ix, iy = bu.split_indices()
    x = np.zeros(bu.N)
    if fixed is not None and fixed.any():
        nodes = g.dof[fixed]
        if fixed_values is not None:
            x[ix[nodes]] = fixed_values[fixed][:, 0]
            x[iy[nodes]] = fixed_values[fixed][:, 1]
        D = np.concatenate([ix[nodes], iy[nodes]])
        x = skfem.solve(*skfem.condense(K, f, x=x, D=D))
    else:
        raise ConfigError(f"{what}: no displacement is prescribed, the elasticity problem is singular (rigid motions)")
    if not np.all(np.isfinite(x)):
        raise DataError(f"{what}: the elasticity solve returned NaN or Inf")
    disp = np.stack([x[ix[g.dof]], x[iy[g.dof]]], axis=-1)

    # stress at the quadrature points, L2-projected onto P1 (the vertices)
    grad = bu.interpolate(x).grad  # (2, 2, nelem, nqp)
    eps = 0.5 * (grad + grad.transpose(1, 0, 2, 3))
    tr = eps[0, 0] + eps[1, 1]
    comps = [
        lam * tr + 2 * mu * eps[0, 0],
        lam * tr + 2 * mu * eps[1, 1],
        2 * mu * eps[0, 1],
        lam * tr if plane == "strain" else np.zeros_like(tr),
    ]
    bp = bu.with_element(skfem.ElementTriP1())

    @skfem.BilinearForm
    def mass(u, v, w):
        return u * v

    @skfem.LinearForm
    def moment(v, w):
        return w["s"] * v

    lu = spla.splu(mass.assemble(bp).tocsc())
    rhs = np.stack([moment.assemble(bp, s=c) for c in comps], axis=1)
    s = lu.solve(rhs)  # (n_vertices, 4), vertex order of the mesh
    stress = s[g.dof[::2, ::2]]
    return ElasticSolution(disp, stress)


def von_mises(stress: np.ndarray) -> np.ndarray:
    """von Mises stress of (..., 4) components (sxx, syy, sxy, szz)."""
    sxx, syy, sxy, szz = np.moveaxis(stress, -1, 0)
    return np.sqrt(0.5 * ((sxx - syy) ** 2 + (syy - szz) ** 2 + (szz - sxx) ** 2) + 3 * sxy**2)


# --------------------------------------------------------------------------------------------------
@dataclass
class ElasticityConfig:
    n_theta: int = 108  # points around each ring (divisible by 4)
    n_rings: int = 9  # rings from the void to the square; P = n_theta * n_rings
    grading: float = 1.0  # ring fractions (i / (n_rings - 1))^grading (> 1 clusters at the void)
    r_min: float = 0.2  # void radius = r_min + (r_max - r_min) / (1 + exp(r~))
    r_max: float = 0.4
    n_modes: int = 8  # Fourier modes of r~ (2 n_modes + 1 coefficients)
    radius_sigma: float = 4.0  # r~ covariance sigma^2 (-d^2/ds^2 + tau^2)^-1, s = theta / (2 pi)
    radius_tau: float = 3.0
    youngs_modulus: float = 1.137e6
    poisson_ratio: float = 0.45
    plane: str = "strain"  # strain | stress
    traction: float = 100.0  # vertical traction on the top edge


@register_generator
class ElasticityGenerator(
    Generator, name="elasticity", config=ElasticityConfig, inputs=("pos",), targets=("sigma",), chunk_size=64
):
    field_labels = {"pos": "point coordinates", "sigma": "von Mises stress"}

    def validate(self, cfg: ElasticityConfig) -> None:
        if not isinstance(cfg.n_theta, int) or cfg.n_theta < 8 or cfg.n_theta % 4:
            raise ConfigError(
                f"elasticity n_theta must be a multiple of 4 and >= 8 (the square's corners are nodes), "
                f"got {cfg.n_theta}"
            )
        if not isinstance(cfg.n_rings, int) or cfg.n_rings < 2:
            raise ConfigError(
                f"elasticity n_rings must be an integer >= 2 (the void and the square), got {cfg.n_rings}"
            )
        if not isinstance(cfg.n_modes, int) or cfg.n_modes < 0:
            raise ConfigError(f"elasticity n_modes must be an integer >= 0, got {cfg.n_modes}")
        if cfg.n_theta < 8 * cfg.n_modes:
            raise ConfigError(
                f"elasticity n_theta = {cfg.n_theta} is too few nodes for n_modes = {cfg.n_modes}: "
                f"expected n_theta >= 8 n_modes = {8 * cfg.n_modes} (8 nodes per wavelength of the "
                "shortest mode of the void boundary)"
            )
        if not (0 < cfg.r_min < cfg.r_max):
            raise ConfigError(
                f"elasticity radii must satisfy 0 < r_min < r_max, got r_min = {cfg.r_min}, r_max = {cfg.r_max}"
            )
        if not cfg.r_max < CENTRE:
            raise ConfigError(
                f"elasticity r_max = {cfg.r_max} makes the void too large for the unit cell: "
                f"expected r_max < {CENTRE} (the distance from the centre to the cell's sides)"
            )
        if not cfg.grading > 0:
            raise ConfigError(f"elasticity grading must be > 0, got {cfg.grading}")
        if not (cfg.radius_sigma >= 0 and math.isfinite(cfg.radius_sigma)):
            raise ConfigError(f"elasticity radius_sigma must be >= 0 and finite, got {cfg.radius_sigma}")
        if not cfg.radius_tau > 0:
            raise ConfigError(f"elasticity radius_tau must be > 0, got {cfg.radius_tau}")
        if not (cfg.youngs_modulus > 0 and math.isfinite(cfg.youngs_modulus)):
            raise ConfigError(f"elasticity youngs_modulus must be > 0, got {cfg.youngs_modulus}")
        if not -1 < cfg.poisson_ratio < 0.5:
            raise ConfigError(
                f"elasticity poisson_ratio must lie in (-1, 0.5) (positive definite elasticity), "
                f"got {cfg.poisson_ratio}"
            )
        if cfg.plane not in ("strain", "stress"):
            raise ConfigError(f"elasticity plane must be 'strain' or 'stress', got {cfg.plane!r}")
        if not math.isfinite(cfg.traction):
            raise ConfigError(f"elasticity traction must be finite, got {cfg.traction}")

    def tag(self, cfg: ElasticityConfig) -> str:
        return f"p{cfg.n_theta * cfg.n_rings}"

    def radius_modes(self, cfg: ElasticityConfig, index: int, seed: int) -> np.ndarray:
        """(2 n_modes + 1,) coefficients (c0, a1, b1, ..., aK, bK) of r~ for sample ``index``."""
        xi = torch.randn(2 * cfg.n_modes + 1, generator=sample_rng(seed, int(index)), dtype=torch.float64).numpy()
        k = np.repeat(np.arange(1, cfg.n_modes + 1), 2)
        std = np.concatenate(
            [
                [cfg.radius_sigma / cfg.radius_tau],
                math.sqrt(2) * cfg.radius_sigma / np.sqrt((2 * np.pi * k) ** 2 + cfg.radius_tau**2),
            ]
        )
        return std * xi

    def solve(self, cfg: ElasticityConfig, modes: np.ndarray, what: str = "elasticity"):
        """(pos (P, 2), von Mises (P,), solution) of the cell whose void has the coefficients ``modes``."""
        X = void_cell_grid(radius_function(modes, cfg.r_min, cfg.r_max), cfg.n_theta, cfg.n_rings, cfg.grading)
        g = structured_p2_mesh(X, periodic=True)
        fixed = np.zeros(X.shape[:2], dtype=bool)
        fixed[-1] = X[-1, :, 1] == 0.0  # the bottom edge y = 0 (corners included)
        top = g.mesh.facets_satisfying(lambda p: p[1] == 1.0, boundaries_only=True)
        lam, mu = lame(cfg.youngs_modulus, cfg.poisson_ratio, cfg.plane)
        sol = solve_linear_elasticity(
            g, lam, mu, cfg.plane, fixed=fixed, traction_facets=top, traction=(0.0, cfg.traction), what=what
        )
        pos = X[::2, ::2].reshape(-1, 2)
        return pos, von_mises(sol.stress).reshape(-1), sol

    def generate(self, cfg: ElasticityConfig, ids, seed, device):
        n, P = len(ids), cfg.n_theta * cfg.n_rings
        pos = np.empty((n, P, 2), np.float32)
        sigma = np.empty((n, P, 1), np.float32)
        modes = np.empty((n, 2 * cfg.n_modes + 1), np.float32)
        for k, i in enumerate(ids):
            c = self.radius_modes(cfg, i, seed)
            p, vm, _ = self.solve(cfg, c, what=f"elasticity sample {int(i)} (seed {seed})")
            pos[k], sigma[k, :, 0], modes[k] = p, vm, c
        return {"fields/pos": pos, "fields/sigma": sigma, "params/radius_modes": modes}
