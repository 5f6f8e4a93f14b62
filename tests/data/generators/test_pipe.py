import math

import numpy as np
import pytest

pytest.importorskip("skfem")

from scipy.interpolate import CubicHermiteSpline  # noqa: E402

from neurodyn.data.generators import get_generator  # noqa: E402
from neurodyn.data.generators.pipe import pipe_grid, solve_stokes_channel  # noqa: E402
from neurodyn.errors import ConfigError  # noqa: E402


def _section_flux(X, u):
    """Flux of u_x through each vertical vertex line x = x_i (even i): Simpson's rule in y, exact for the
    P2 trace (quadratic between consecutive even nodes) when the section is a straight vertical line."""
    y, uu = X[::2, :, 1], u[::2]
    h = y[:, 2::2] - y[:, :-2:2]
    return (h / 6 * (uu[:, :-2:2] + 4 * uu[:, 1:-1:2] + uu[:, 2::2])).sum(axis=1)


def test_straight_pipe_gives_poiseuille_flow_exactly():
    g = get_generator("pipe")
    cfg = g.make_config(resolution_x=33, resolution_y=17, amplitude=0.0, slope=0.0, inflow_max=1.5)
    out = g.generate(cfg, np.array([0]), seed=0, device="cpu")
    X = out["fields/mesh"][0].astype(np.float64)
    eta = np.linspace(0, 1, 17)
    np.testing.assert_allclose(X[..., 0], np.broadcast_to(np.linspace(0, 10, 33)[:, None], (33, 17)), atol=1e-6)
    np.testing.assert_allclose(X[..., 1], np.broadcast_to(eta - 0.5, (33, 17)), atol=1e-7)
    want = 1.5 * 4 * eta * (1 - eta)
    np.testing.assert_allclose(out["fields/u"][0, ..., 0], np.broadcast_to(want, (33, 17)), atol=1e-6)  # float32
    # in float64, and for a straight pipe tilted by atan(0.7) (normal offset: a rotated channel)
    sol = solve_stokes_channel(pipe_grid(cfg, np.zeros(5), np.zeros(5)), 1.5)
    assert np.abs(sol.u - want).max() < 1e-11 and np.abs(sol.v).max() < 1e-11
    tilt = g.make_config(resolution_x=33, resolution_y=17, offset="normal", amplitude=0.0, slope=0.0)
    xk = np.linspace(0, 10, 5)
    X = pipe_grid(tilt, 0.7 * xk, np.full(5, 0.7))
    sol = solve_stokes_channel(X, 1.0, math.atan(0.7))
    a = math.atan(0.7)
    assert np.abs(sol.u - 4 * eta * (1 - eta) * math.cos(a)).max() < 1e-11
    assert np.abs(sol.v - 4 * eta * (1 - eta) * math.sin(a)).max() < 1e-11
    # Poiseuille pressure: p = 8 U_max (L - x) / width^2 (viscosity 1), zero at the outlet
    np.testing.assert_allclose(
        solve_stokes_channel(pipe_grid(cfg, np.zeros(5), np.zeros(5)), 1.0).p[:, 4],
        8 * (10 - np.linspace(0, 10, 17)),
        atol=1e-9,
    )


@pytest.mark.slow
def test_bent_pipe_converges_under_refinement():
    # Self-convergence of the nodal velocity on a bent pipe (same centreline at every resolution):
    # P2 velocities on a smooth geometry converge at rate ~3 (RMS over the shared nodes).
    g = get_generator("pipe")
    us = {}
    for n in (17, 33, 65, 129):
        cfg = g.make_config(resolution_x=n, resolution_y=n, amplitude=0.5, slope=0.5)
        y, m = g.controls(cfg, 3, seed=0)
        us[n] = solve_stokes_channel(pipe_grid(cfg, y, m), 1.0).u
    err = [np.sqrt(np.mean((us[n] - us[129][:: 128 // (n - 1), :: 128 // (n - 1)]) ** 2)) for n in (17, 33, 65)]
    rates = np.log2(np.array(err[:-1]) / np.array(err[1:]))
    assert rates[0] > 1.9 and rates[1] > 2.7, (err, rates)  # measured 2.2, 3.2
    assert err[-1] < 2e-3 * np.abs(us[129]).max()


def test_mesh_nodes_lie_on_the_walls_and_mass_is_conserved():
    g = get_generator("pipe")
    cfg = g.make_config(resolution_x=65, resolution_y=33)
    out = g.generate(cfg, np.array([2]), seed=0, device="cpu")
    X = out["fields/mesh"][0].astype(np.float64)
    yk, mk = out["params/control_y"][0].astype(np.float64), out["params/control_slope"][0].astype(np.float64)
    assert mk[0] == 0 and mk[-1] == 0 and np.abs(yk).max() <= 2 and np.abs(mk).max() <= 1
    f = CubicHermiteSpline(np.linspace(0, 10, 5), yk, mk)  # independent centreline oracle
    x = X[:, 0, 0]
    np.testing.assert_allclose(X[..., 0], np.broadcast_to(x[:, None], X.shape[:2]), atol=1e-12)
    np.testing.assert_allclose(X[:, 0, 1], f(x) - 0.5, atol=2e-6)  # lower wall
    np.testing.assert_allclose(X[:, -1, 1], f(x) + 0.5, atol=2e-6)  # upper wall
    assert np.all(np.diff(X[..., 1], axis=1) > 0)
    u = out["fields/u"][0, ..., 0].astype(np.float64)
    assert np.all(u[:, 0] == 0) and np.all(u[:, -1] == 0)  # no slip
    flux = _section_flux(X, u)  # inflow flux: 2/3 U_max width
    # Taylor-Hood conserves mass weakly: measured 0.032 here (strongly bent pipe, 65 x 33), 0.005 at 129 x 65
    assert np.abs(flux / (2 / 3) - 1).max() < 0.05, np.abs(flux / (2 / 3) - 1).max()
    assert abs(flux[0] / (2 / 3) - 1) < 1e-12 and abs(flux[-1] / (2 / 3) - 1) < 1e-3

    # normal offset: wall nodes at distance width/2 from the centreline, offset along its normal
    cfg = g.make_config(resolution_x=33, resolution_y=9, offset="normal", amplitude=0.3, slope=0.3)
    yk, mk = g.controls(cfg, 1, seed=0)
    X = pipe_grid(cfg, yk, mk)
    f = CubicHermiteSpline(np.linspace(0, 10, 5), yk, mk)
    xs = np.linspace(0, 10, 20001)
    curve = np.stack([xs, f(xs)], axis=1)
    for wall in (X[:, 0], X[:, -1]):
        dist = np.sqrt(((wall[:, None, :] - curve[None]) ** 2).sum(-1)).min(axis=1)
        np.testing.assert_allclose(dist, 0.5, atol=1e-6)
    x = X[:, 4, 0]
    tangent = np.stack([np.ones_like(x), f(x, 1)], axis=1)
    np.testing.assert_allclose(((X[:, -1] - X[:, 0]) * tangent).sum(-1), 0, atol=1e-12)


def test_generator_shapes_refinement_and_determinism():
    g = get_generator("pipe")
    assert g.inputs == ("mesh",) and g.targets == ("u",) and g.coords(g.make_config()) == {}
    cfg = g.make_config(resolution_x=17, resolution_y=9)
    out = g.generate(cfg, np.arange(3), seed=5, device="cpu")
    assert out["fields/mesh"].shape == (3, 17, 9, 2) and out["fields/u"].shape == (3, 17, 9, 1)
    assert out["params/control_y"].shape == (3, 5) and out["params/control_slope"].shape == (3, 5)
    assert all(v.dtype == np.float32 for v in out.values())
    alone = g.generate(cfg, np.array([1]), seed=5, device="cpu")
    for key in out:
        np.testing.assert_array_equal(alone[key][0], out[key][1])
    other = g.generate(cfg, np.array([1]), seed=6, device="cpu")
    assert not np.array_equal(other["fields/mesh"][0], out["fields/mesh"][1])
    # refine=2 solves on 33 x 17 and stores every other node: same mesh, velocity close to the fine solve
    fine = g.generate(g.make_config(resolution_x=17, resolution_y=9, refine=2), np.array([1]), seed=5, device="cpu")
    np.testing.assert_array_equal(fine["fields/mesh"][0], out["fields/mesh"][1])
    ref = g.generate(g.make_config(resolution_x=33, resolution_y=17), np.array([1]), seed=5, device="cpu")
    np.testing.assert_allclose(fine["fields/u"][0], ref["fields/u"][0, ::2, ::2], atol=1e-6)
    assert g.make_config().resolution_x == g.make_config().resolution_y == 129  # Geo-FNO's mesh by default


@pytest.mark.parametrize(
    "bad",
    [
        dict(resolution_x=128),
        dict(resolution_y=3),
        dict(resolution_x=13),
        dict(n_control=1),
        dict(width=0.0),
        dict(length=-1.0),
        dict(amplitude=-0.1),
        dict(offset="normal"),
        dict(offset="normal", amplitude=0.5, slope=0.5),
        dict(offset="radial"),
        dict(end_slopes="free"),
        dict(refine=0),
        dict(resolution=129),
    ],
)
def test_impossible_configs_are_refused(bad):
    with pytest.raises(ConfigError):
        get_generator("pipe").make_config(**bad)


def test_normal_offset_refusal_names_the_walls():
    with pytest.raises(ConfigError, match="walls cross"):
        get_generator("pipe").make_config(offset="normal")
    get_generator("pipe").make_config(offset="normal", amplitude=0.3, slope=0.3)  # bound 1.3 < 2: accepted


def test_saddle_solver_falls_back_to_pivoting():
    # The fast path factorises without pivoting in the given order; a zero leading pivot must fall
    # back to SuperLU with partial pivoting and still solve the system.
    import scipy.sparse as sp

    from neurodyn.data.generators.pipe import _solve_saddle

    A = sp.csr_matrix(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 2.0], [0.0, 2.0, 1.0]]))
    b = np.array([1.0, 2.0, 3.0])
    y = _solve_saddle(A, b, np.array([0, 1, 2]))
    np.testing.assert_allclose(A @ y, b, atol=1e-12)
