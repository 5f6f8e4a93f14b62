"""Flow in a randomly bent pipe on a curvilinear structured grid, in the spirit of Geo-FNO's Pipe.

Geo-FNO's Pipe (Li et al. 2022, as recalled from the paper: not in this repo's sources) solves the
incompressible Navier-Stokes equations (viscosity 0.005) in a pipe of length 10 and width 1 whose
centreline is a piecewise cubic through 5 equispaced control nodes with heights ~ U[-2, 2] and slopes
~ U[-1, 1], parabolic inflow, zero-pressure outflow, and stores the horizontal velocity on a
129 x 129 structured mesh. Here the same geometry carries **steady Stokes flow**, solved with
scikit-fem (our choice: Stokes keeps the physics Geo-FNO's target shows -- no-slip walls, a parabolic
profile that follows the bends, mass conservation through every section, a velocity field that
depends on the whole geometry -- at the cost of one linear solve per sample, where Navier-Stokes at
Re = 200 would need Newton iterations and continuation). In non-dimensional form on the channel Omega:

    -Laplacian(u) + grad(p) = 0,   div(u) = 0                          in Omega,
    u = 0                                                             on the two walls,
    u = U_max 4 eta (1 - eta) (cos a, sin a),  a = atan f'(0)          on the inlet x = 0,
    du/dn - p n = 0                         ("do-nothing" outflow)    on the outlet x = L.

eta in [0, 1] is the coordinate across the section, so the inflow is the fully developed (Poiseuille)
profile of a straight pipe aligned with the centreline at the inlet; the do-nothing condition admits
Poiseuille flow exactly, so a straight pipe gives u = U_max 4 eta (1 - eta) everywhere. The velocity
of Stokes flow does not depend on the viscosity with these conditions (it only scales p), so there is
no viscosity option.

Geometry. The centreline y = f(x), x in [0, L], is the cubic Hermite interpolant of the control heights
y_k ~ U[-amplitude, amplitude] and slopes m_k ~ U[-slope, slope] at x_k = k L / (n_control - 1).
``end_slopes="zero"`` (default) sets m_0 = m_last = 0 so that the pipe enters and leaves horizontally
and the inflow/outflow sections are perpendicular to the walls (then every boundary condition is
compatible at the corners and the solution is smooth); ``end_slopes="random"`` draws them like the
others (Geo-FNO's recipe as we recall it; the do-nothing outlet on a tilted section then leaves a mild
corner singularity there). ``offset`` builds the walls:

* ``"vertical"`` (default): walls y = f(x) -/+ width/2, grid lines of constant x (the section across
  the pipe is vertical; the width is measured vertically). The walls can never cross.
* ``"normal"``: walls c(x) -/+ (width/2) n(x) with n the unit normal of the centreline c(x) = (x, f(x))
  (constant width normal to the flow). The walls fold when the curvature exceeds 2/width; ``validate``
  refuses configs whose worst-case curvature bound, max|f''| <= 12 amplitude/h^2 + 6 slope/h on
  segments of length h, allows that.

Mesh and discretisation. The (H, W) = (resolution_x, resolution_y) grid nodes are
X[i, j] = centreline point at x_i = L i/(H-1) offset by width (eta_j - 1/2), eta_j = j/(W-1) (axis 0
runs along the pipe, axis 1 across it; H and W odd). Every 3 x 3 block of nodes is one curvilinear
quadrilateral cut along a diagonal into two 6-node (isoparametric P2) triangles, the diagonal
alternating in a checkerboard; the grid nodes are then exactly the P2 nodes, so Taylor-Hood elements
(P2 velocity, P1 pressure on the block corners) give the velocity at every stored node without any
recovery step; ``refine`` = r > 1 solves on the grid refined r times per axis and stores every r-th
node (r^2 times the unknowns, ~6x the time). With the default, strongly bent pipes at 129 x 129 the
flux through the sections varies by up to 0.5 % (Taylor-Hood conserves mass only weakly), 0.06 % with
r = 2, and the stored velocity moves by 0.06 % (relative RMS) from r = 1 to r = 2. The saddle-point
system is factorised by SuperLU in a nested-dissection order of the grid (separators on element
boundaries, pressure after velocity at each node, no pivoting), checked by its residual after one
step of iterative refinement, with a fallback to SuperLU's COLAMD order with partial pivoting.

Stored per sample: ``fields/mesh`` (H, W, 2) node coordinates, ``fields/u`` (H, W, 1) the horizontal
velocity u_x at the nodes (the benchmark target), ``params/control_y`` and ``params/control_slope``
(n_control,) the centreline control values actually used. No ``coords``: the mesh varies per sample.
Computation in float64 on the CPU (scikit-fem/SciPy; the ``device`` argument is not used), storage
float32. Requires scikit-fem (``pip install scikit-fem``, extra ``neurodyn[fem]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

from ...errors import ConfigError, DataError, optional_import
from .base import Generator, register_generator, sample_rng


def import_skfem():
    """scikit-fem, or a ConfigError saying how to install it."""
    return optional_import(
        "skfem", "the geometry generators (elasticity, pipe)", "pip install scikit-fem (or neurodyn[fem])"
    )


# --------------------------------------------------------------------------------------------------
# structured grids of quadratic triangles (shared with elasticity.py)
class StructuredP2Mesh(NamedTuple):
    """A scikit-fem MeshTri2 built on a structured grid of nodes.

    ``mesh``: the quadratic mesh; ``dof``: (Hf, Wf) index of each grid node among the scalar P2
    degrees of freedom (= columns of ``mesh.doflocs``); vertices are the grid nodes with both indices
    even, and their P2 dof index is also their vertex index (P1 dof index) in ``mesh``.
    """

    mesh: object
    dof: np.ndarray


def structured_p2_mesh(X: np.ndarray, periodic: bool = False) -> StructuredP2Mesh:
    """Quadratic triangles on the node grid ``X`` (Hf, Wf, 2).

    Every 3 x 3 block of nodes [2I..2I+2] x [2J..2J+2] is a curvilinear quadrilateral split along one
    diagonal into two 6-node triangles (vertices, then the midpoints of edges 01, 12, 02), the
    diagonal alternating like a checkerboard in (I + J). Hf must be odd; Wf must be odd, or even when
    ``periodic`` (axis 1 wraps around: node Wf is node 0). Triangles are oriented counter-clockwise
    when axis 0 x axis 1 is a right-handed frame in the plane.
    """
    skfem = import_skfem()
    hf, wf = X.shape[:2]
    if hf < 3 or hf % 2 == 0 or (wf % 2 == 0) != periodic or wf < (4 if periodic else 3):
        raise ConfigError(
            f"a structured P2 grid needs an odd number >= 3 of nodes along axis 0 and "
            f"{'an even number >= 4' if periodic else 'an odd number >= 3'} along axis 1, "
            f"got {hf} x {wf}"
        )
    idx = np.arange(hf * wf).reshape(hf, wf)
    if periodic:
        idx = np.concatenate([idx, idx[:, :1]], axis=1)
    nb_i, nb_j = (hf - 1) // 2, (idx.shape[1] - 1) // 2
    I, J = np.meshgrid(2 * np.arange(nb_i), 2 * np.arange(nb_j), indexing="ij")
    n = lambda di, dj: idx[I + di, J + dj]  # noqa: E731
    a, b, c, d = n(0, 0), n(2, 0), n(2, 2), n(0, 2)  # corners, counter-clockwise in (i, j)
    mab, mbc, mcd, mda, ctr = n(1, 0), n(2, 1), n(1, 2), n(0, 1), n(1, 1)
    even = ((I + J) // 2) % 2 == 0
    # diagonal a-c on even blocks: (a, b, c) and (a, c, d); diagonal b-d on odd blocks: (a, b, d), (b, c, d)
    t1 = np.where(even, [a, b, c, mab, mbc, ctr], [a, b, d, mab, ctr, mda])
    t2 = np.where(even, [a, c, d, ctr, mcd, mda], [b, c, d, mbc, mcd, ctr])
    t = np.concatenate([t1.reshape(6, -1), t2.reshape(6, -1)], axis=1)
    mesh = skfem.MeshTri2(np.ascontiguousarray(X.reshape(-1, 2).T, dtype=np.float64), t)
    # recover the dof number of every grid node from the (reordered) element connectivity
    element_dofs = skfem.Basis(mesh, skfem.ElementTriP2(), intorder=1).element_dofs
    dof = np.empty(hf * wf, dtype=np.int64)
    dof[t.ravel()] = element_dofs.ravel()
    return StructuredP2Mesh(mesh, dof.reshape(hf, wf))


def check_jacobian(basis, what: str) -> None:
    """Raise DataError when an element of ``basis`` is inverted or degenerate (det J <= 0 somewhere)."""
    det = basis.mapping.detDF(basis.X)
    if not np.all(det > 0):
        raise DataError(
            f"{what}: the mapped mesh has {int(np.sum(np.any(det <= 0, axis=1)))} inverted or degenerate elements"
        )


# --------------------------------------------------------------------------------------------------
# geometry
def hermite_centreline(x: np.ndarray, xk: np.ndarray, yk: np.ndarray, mk: np.ndarray):
    """Cubic Hermite interpolant of heights ``yk`` and slopes ``mk`` at the knots ``xk``: f, f', f'' at ``x``."""
    seg = np.clip(np.searchsorted(xk, x, side="right") - 1, 0, len(xk) - 2)
    h = xk[seg + 1] - xk[seg]
    s = (x - xk[seg]) / h
    y0, y1, m0, m1 = yk[seg], yk[seg + 1], mk[seg] * h, mk[seg + 1] * h
    h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
    d00, d10, d01, d11 = 6 * s**2 - 6 * s, 3 * s**2 - 4 * s + 1, -6 * s**2 + 6 * s, 3 * s**2 - 2 * s
    e00, e10, e01, e11 = 12 * s - 6, 6 * s - 4, -12 * s + 6, 6 * s - 2
    f = h00 * y0 + h10 * m0 + h01 * y1 + h11 * m1
    fp = (d00 * y0 + d10 * m0 + d01 * y1 + d11 * m1) / h
    fpp = (e00 * y0 + e10 * m0 + e01 * y1 + e11 * m1) / h**2
    return f, fp, fpp


def pipe_grid(cfg: PipeConfig, control_y: np.ndarray, control_slope: np.ndarray, refine: int = 1) -> np.ndarray:
    """(H, W, 2) node coordinates of the pipe with the given centreline control values.

    ``refine`` r > 1 gives the ((H-1) r + 1, (W-1) r + 1) grid whose every r-th node is the stored grid.
    """
    H, W = (cfg.resolution_x - 1) * refine + 1, (cfg.resolution_y - 1) * refine + 1
    xk = np.linspace(0.0, cfg.length, cfg.n_control)
    x = np.linspace(0.0, cfg.length, H)
    f, fp, _ = hermite_centreline(x, xk, np.asarray(control_y, float), np.asarray(control_slope, float))
    off = cfg.width * (np.linspace(0.0, 1.0, W) - 0.5)
    X = np.empty((H, W, 2))
    if cfg.offset == "vertical":
        X[..., 0] = x[:, None]
        X[..., 1] = f[:, None] + off[None, :]
    else:
        norm = np.sqrt(1 + fp**2)
        X[..., 0] = x[:, None] - (fp / norm)[:, None] * off[None, :]
        X[..., 1] = f[:, None] + (1 / norm)[:, None] * off[None, :]
    return X


def curvature_bound(length: float, n_control: int, amplitude: float, slope: float) -> float:
    """Upper bound of |f''| (>= the curvature) of any centreline the config can draw."""
    h = length / (n_control - 1)
    return 12 * amplitude / h**2 + 6 * slope / h


# --------------------------------------------------------------------------------------------------
# solver
def _nested_dissection(hf: int, wf: int) -> np.ndarray:
    """Grid nodes in nested-dissection order; separators are even grid lines (P2 element boundaries).

    A grid line of even index separates the quadratic elements on its two sides, so the two halves of
    a box share no matrix entry once the line is ordered after them.
    """
    idx = np.arange(hf * wf).reshape(hf, wf)
    out: list[np.ndarray] = []

    def split_at(lo: int, hi: int) -> int | None:  # an even line strictly inside [lo, hi)
        m = (lo + hi) // 2
        for cand in (m - m % 2, m - m % 2 + 2):
            if lo < cand < hi - 1:
                return cand
        return None

    def visit(i0: int, i1: int, j0: int, j1: int) -> None:
        if (i1 - i0) * (j1 - j0) > 64:
            if i1 - i0 >= j1 - j0:
                m = split_at(i0, i1)
                if m is not None:
                    visit(i0, m, j0, j1)
                    visit(m + 1, i1, j0, j1)
                    out.append(idx[m, j0:j1])
                    return
            m = split_at(j0, j1)
            if m is not None:
                visit(i0, i1, j0, m)
                visit(i0, i1, m + 1, j1)
                out.append(idx[i0:i1, m])
                return
        out.append(idx[i0:i1, j0:j1].ravel())

    visit(0, hf, 0, wf)
    return np.concatenate(out)


def _solve_saddle(A: sp.spmatrix, b: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    """Solve A y = b: SuperLU without pivoting in ``order`` (fast), else COLAMD with pivoting."""
    A = A.tocsr()
    scale = float(np.abs(b).max()) or 1.0
    if order is not None:
        try:
            Ap = A[order][:, order].tocsc()
            lu = spla.splu(Ap, permc_spec="NATURAL", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
            y = np.empty_like(b)
            y[order] = lu.solve(b[order])
            r = b - A @ y
            y[order] += lu.solve(r[order])  # one step of iterative refinement
            if np.abs(b - A @ y).max() <= 1e-9 * scale and np.all(np.isfinite(y)):
                return y
        except RuntimeError:  # singular pivot: fall back to partial pivoting
            pass
    return spla.splu(A.tocsc(), permc_spec="COLAMD").solve(b)


class StokesSolution(NamedTuple):
    u: np.ndarray  # (H, W) horizontal velocity at the grid nodes
    v: np.ndarray  # (H, W) vertical velocity
    p: np.ndarray  # (H//2 + 1, W//2 + 1) pressure at the vertices (even nodes)


def solve_stokes_channel(
    X: np.ndarray, inflow_max: float = 1.0, inflow_angle: float = 0.0, what: str = "pipe"
) -> StokesSolution:
    """Stokes flow in the channel whose structured node grid is ``X`` (H, W, 2), H and W odd.

    Axis 0 runs from the inlet (i = 0) to the outlet (i = H-1); the walls are j = 0 and j = W-1.
    Taylor-Hood P2/P1 on the isoparametric triangulation of ``structured_p2_mesh``; inflow
    ``inflow_max * 4 eta (1 - eta) (cos a, sin a)`` with a = ``inflow_angle``, no-slip walls,
    do-nothing outflow. See the module docstring for the equations.
    """
    skfem = import_skfem()
    from skfem.helpers import ddot, div, grad

    H, W = X.shape[:2]
    g = structured_p2_mesh(X)
    bu = skfem.Basis(g.mesh, skfem.ElementVector(skfem.ElementTriP2()), intorder=4)
    check_jacobian(bu, what)
    bp = bu.with_element(skfem.ElementTriP1())

    @skfem.BilinearForm
    def viscous(u, v, w):
        return ddot(grad(u), grad(v))

    @skfem.BilinearForm
    def pressure(u, q, w):
        return -div(u) * q

    A = viscous.assemble(bu)
    B = pressure.assemble(bu, bp)
    K = sp.bmat([[A, B.T], [B, None]], format="csr")
    ix, iy = bu.split_indices()
    dof = g.dof
    fixed_nodes = np.concatenate([dof[:, 0], dof[:, -1], dof[0, 1:-1]])
    inlet = dof[0, 1:-1]
    eta = np.linspace(0.0, 1.0, W)[1:-1]
    profile = inflow_max * 4 * eta * (1 - eta)
    x = np.zeros(K.shape[0])
    x[ix[inlet]] = profile * math.cos(inflow_angle)
    x[iy[inlet]] = profile * math.sin(inflow_angle)
    D = np.concatenate([ix[fixed_nodes], iy[fixed_nodes]])
    free = np.setdiff1d(np.arange(K.shape[0]), D)
    Kf = K[free][:, free]
    rhs = -(K[free][:, D] @ x[D])
    # unknowns in nested-dissection order of the grid: (u_x, u_y[, p]) per node, p after the velocity
    order_nodes = _nested_dissection(H, W)
    d = dof.ravel()[order_nodes]
    nv = bp.N
    per_node = [ix[d], iy[d], np.where(d < nv, bu.N + np.minimum(d, nv - 1), -1)]
    seq = np.stack(per_node, axis=1).ravel()
    seq = seq[seq >= 0]
    pos = -np.ones(K.shape[0], dtype=np.int64)
    pos[free] = np.arange(len(free))
    order = pos[seq]
    order = order[order >= 0]
    x[free] = _solve_saddle(Kf, rhs, order if len(order) == len(free) else None)
    if not np.all(np.isfinite(x)):
        raise DataError(f"{what}: the Stokes solve returned NaN or Inf")
    u = x[ix[dof]]
    v = x[iy[dof]]
    p = x[bu.N + dof[::2, ::2]]
    return StokesSolution(u, v, p)


# --------------------------------------------------------------------------------------------------
@dataclass
class PipeConfig:
    resolution_x: int = 129  # H: nodes along the pipe (odd)
    resolution_y: int = 129  # W: nodes across the pipe (odd)
    length: float = 10.0
    width: float = 1.0
    n_control: int = 5  # centreline control nodes (4 cubic pieces)
    amplitude: float = 2.0  # control heights ~ U[-amplitude, amplitude]
    slope: float = 1.0  # control slopes ~ U[-slope, slope]
    end_slopes: str = "zero"  # zero | random: slope at the first and last control node
    offset: str = "vertical"  # vertical | normal: how the walls are offset from the centreline
    inflow_max: float = 1.0  # centre velocity of the parabolic inflow
    refine: int = 1  # solve on the grid refined r times per axis, store every r-th node


@register_generator
class PipeGenerator(Generator, name="pipe", config=PipeConfig, inputs=("mesh",), targets=("u",), chunk_size=16):
    field_labels = {"mesh": "mesh node coordinates", "u": "horizontal velocity"}

    def validate(self, cfg: PipeConfig) -> None:
        for field in ("resolution_x", "resolution_y"):
            v = getattr(cfg, field)
            if not isinstance(v, int) or v < 5 or v % 2 == 0:
                raise ConfigError(f"pipe {field} must be an odd integer >= 5 (pairs of quadratic elements), got {v}")
        if not cfg.n_control >= 2:
            raise ConfigError(
                f"pipe n_control must be >= 2 (a centreline needs two control nodes), got {cfg.n_control}"
            )
        need = 4 * (cfg.n_control - 1) + 1
        if cfg.resolution_x < need:
            raise ConfigError(
                f"pipe resolution_x = {cfg.resolution_x} is too few nodes for {cfg.n_control} control "
                f"nodes: expected >= {need} (two quadratic elements per cubic piece)"
            )
        for field in ("length", "width"):
            if not getattr(cfg, field) > 0:
                raise ConfigError(f"pipe {field} must be > 0, got {getattr(cfg, field)}")
        for field in ("amplitude", "slope"):
            v = getattr(cfg, field)
            if not (v >= 0 and math.isfinite(v)):
                raise ConfigError(f"pipe {field} must be >= 0 and finite, got {v}")
        if not isinstance(cfg.refine, int) or cfg.refine < 1:
            raise ConfigError(f"pipe refine must be an integer >= 1, got {cfg.refine}")
        if not math.isfinite(cfg.inflow_max):
            raise ConfigError(f"pipe inflow_max must be finite, got {cfg.inflow_max}")
        if cfg.end_slopes not in ("zero", "random"):
            raise ConfigError(f"pipe end_slopes must be 'zero' or 'random', got {cfg.end_slopes!r}")
        if cfg.offset not in ("vertical", "normal"):
            raise ConfigError(f"pipe offset must be 'vertical' or 'normal', got {cfg.offset!r}")
        if cfg.offset == "normal":
            kappa = curvature_bound(cfg.length, cfg.n_control, cfg.amplitude, cfg.slope)
            if kappa * cfg.width / 2 >= 1:
                raise ConfigError(
                    f"pipe with offset='normal': the walls cross where the centreline curvature exceeds 2/width = "
                    f"{2 / cfg.width:.3g}, and with amplitude {cfg.amplitude}, slope {cfg.slope} and {cfg.n_control} "
                    f"control nodes over length {cfg.length} it is only bounded by 12 amplitude/h^2 + 6 slope/h = "
                    f"{kappa:.3g}; expected that bound < 2/width (reduce amplitude or slope, or use offset='vertical')"
                )

    def tag(self, cfg: PipeConfig) -> str:
        return f"r{cfg.resolution_x}x{cfg.resolution_y}" + (f"ref{cfg.refine}" if cfg.refine > 1 else "")

    def controls(self, cfg: PipeConfig, index: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Centreline control heights and slopes (n_control,) of sample ``index``."""
        r = torch.rand(2, cfg.n_control, generator=sample_rng(seed, int(index)), dtype=torch.float64).numpy()
        y = cfg.amplitude * (2 * r[0] - 1)
        m = cfg.slope * (2 * r[1] - 1)
        if cfg.end_slopes == "zero":
            m[0] = m[-1] = 0.0
        return y, m

    def generate(self, cfg: PipeConfig, ids, seed, device):
        n = len(ids)
        H, W = cfg.resolution_x, cfg.resolution_y
        mesh = np.empty((n, H, W, 2), np.float32)
        u = np.empty((n, H, W, 1), np.float32)
        cy = np.empty((n, cfg.n_control), np.float32)
        cm = np.empty((n, cfg.n_control), np.float32)
        for k, i in enumerate(ids):
            y, m = self.controls(cfg, i, seed)
            X = pipe_grid(cfg, y, m, cfg.refine)
            sol = solve_stokes_channel(X, cfg.inflow_max, math.atan(m[0]), what=f"pipe sample {int(i)} (seed {seed})")
            r = cfg.refine
            mesh[k], u[k, ..., 0], cy[k], cm[k] = X[::r, ::r], sol.u[::r, ::r], y, m
        return {"fields/mesh": mesh, "fields/u": u, "params/control_y": cy, "params/control_slope": cm}
