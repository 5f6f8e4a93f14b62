import numpy as np
import pytest

pytest.importorskip("skfem")

from neurodyn.data.generators import get_generator  # noqa: E402
from neurodyn.data.generators.elasticity import (  # noqa: E402
    lame,
    radius_function,
    solve_linear_elasticity,
    void_cell_grid,
    von_mises,
)
from neurodyn.data.generators.pipe import structured_p2_mesh  # noqa: E402
from neurodyn.errors import ConfigError  # noqa: E402


def _kirsch(x, y, a, S, E, nu, plane):
    """Infinite plate with a traction-free hole of radius a under uniaxial tension S along x (Kirsch 1898):
    displacement (..., 2) and stress (..., 3) = (sxx, syy, sxy); kappa = 3 - 4 nu (plane strain) or
    (3 - nu) / (1 + nu) (plane stress)."""
    mu = E / (2 * (1 + nu))
    kap = 3 - 4 * nu if plane == "strain" else (3 - nu) / (1 + nu)
    r, th = np.hypot(x, y), np.arctan2(y, x)
    q, c = a / r, a * S / (8 * mu)
    ux = c * (
        (kap + 1) * np.cos(th) / q + 2 * q * ((1 + kap) * np.cos(th) + np.cos(3 * th)) - 2 * q**3 * np.cos(3 * th)
    )
    uy = c * (
        (kap - 3) * np.sin(th) / q + 2 * q * ((1 - kap) * np.sin(th) + np.sin(3 * th)) - 2 * q**3 * np.sin(3 * th)
    )
    sxx = S * (1 - q**2 * (1.5 * np.cos(2 * th) + np.cos(4 * th)) + 1.5 * q**4 * np.cos(4 * th))
    syy = S * (-(q**2) * (0.5 * np.cos(2 * th) - np.cos(4 * th)) - 1.5 * q**4 * np.cos(4 * th))
    sxy = S * (-(q**2) * (0.5 * np.sin(2 * th) + np.sin(4 * th)) + 1.5 * q**4 * np.sin(4 * th))
    return np.stack([ux, uy], -1), np.stack([sxx, syy, sxy], -1)


def _random_void(n_theta, n_rings, seed=3):
    g = get_generator("elasticity")
    cfg = g.make_config(n_theta=n_theta, n_rings=n_rings, n_modes=n_theta // 8)
    r = radius_function(g.radius_modes(cfg, 0, seed), cfg.r_min, cfg.r_max)
    return void_cell_grid(r, n_theta, n_rings)


@pytest.mark.parametrize("plane", ["strain", "stress"])
def test_patch_test_uniform_strain_is_reproduced_exactly(plane):
    # Prescribing an affine displacement on the whole boundary (square and random void) must give that
    # field back at every node and a constant stress lambda tr(eps) I + 2 mu eps, to round-off.
    X = _random_void(24, 4)
    g = structured_p2_mesh(X, periodic=True)
    A = np.array([[2e-3, -1e-3], [3e-3, -1.5e-3]])
    b = np.array([1e-3, -2e-3])
    u_exact = X @ A.T + b
    fixed = np.zeros(X.shape[:2], bool)
    fixed[0] = fixed[-1] = True
    E, nu = 2.0e5, 0.3
    lam, mu = lame(E, nu, plane)
    sol = solve_linear_elasticity(g, lam, mu, plane, fixed=fixed, fixed_values=u_exact)
    np.testing.assert_allclose(sol.displacement, u_exact, rtol=0, atol=1e-12)
    eps = 0.5 * (A + A.T)
    tr = np.trace(eps)
    szz = lam * tr if plane == "strain" else 0.0
    want = np.array([lam * tr + 2 * mu * eps[0, 0], lam * tr + 2 * mu * eps[1, 1], 2 * mu * eps[0, 1], szz])
    assert np.abs(sol.stress - want).max() < 1e-9 * np.abs(want).max()
    # plane stress lambda is E nu / (1 - nu^2): szz = 0 there, and szz = nu (sxx + syy) in plane strain
    if plane == "strain":
        np.testing.assert_allclose(want[3], nu * (want[0] + want[1]), rtol=1e-12)


def test_kirsch_hole_converges_at_second_order():
    # Circular hole (a = 0.2) in the cell, the Kirsch displacement prescribed on the square, the hole
    # traction-free: the exact solution is the Kirsch field. Nodal stress (P2 + L2 projection to P1)
    # must converge at rate ~2 in the RMS over the nodes.
    E, nu, S, a = 1.0, 0.3, 1.0, 0.2
    # the oracle itself: Hooke's law of its displacement gradient (central differences) and a free hole
    pts = np.array([[0.3, 0.1], [-0.25, 0.3], [0.1, -0.45]])
    h = 1e-6
    lam, mu = lame(E, nu, "strain")
    d = [
        (_kirsch(*(pts + dp).T, a, S, E, nu, "strain")[0] - _kirsch(*(pts - dp).T, a, S, E, nu, "strain")[0]) / (2 * h)
        for dp in (np.array([h, 0]), np.array([0, h]))
    ]
    exx, eyy, exy = d[0][:, 0], d[1][:, 1], 0.5 * (d[1][:, 0] + d[0][:, 1])
    s_fd = np.stack([lam * (exx + eyy) + 2 * mu * exx, lam * (exx + eyy) + 2 * mu * eyy, 2 * mu * exy], -1)
    np.testing.assert_allclose(s_fd, _kirsch(*pts.T, a, S, E, nu, "strain")[1], atol=1e-8)
    th = np.linspace(0, 2 * np.pi, 9)
    sh = _kirsch(a * np.cos(th), a * np.sin(th), a, S, E, nu, "strain")[1]
    assert np.abs(sh[:, 0] * np.cos(th) + sh[:, 2] * np.sin(th)).max() < 1e-12
    assert np.abs(sh[:, 2] * np.cos(th) + sh[:, 1] * np.sin(th)).max() < 1e-12

    rms, vm_max = [], []
    for n_theta, n_rings in ((32, 5), (64, 9), (128, 17)):
        X = void_cell_grid(lambda t: np.full_like(t, a), n_theta, n_rings)
        g = structured_p2_mesh(X, periodic=True)
        fixed = np.zeros(X.shape[:2], bool)
        fixed[-1] = True
        u_ex, _ = _kirsch(X[..., 0] - 0.5, X[..., 1] - 0.5, a, S, E, nu, "strain")
        sol = solve_linear_elasticity(g, lam, mu, "strain", fixed=fixed, fixed_values=u_ex)
        V = X[::2, ::2]
        _, s_ex = _kirsch(V[..., 0] - 0.5, V[..., 1] - 0.5, a, S, E, nu, "strain")
        rms.append(np.sqrt(np.mean((sol.stress[..., :3] - s_ex) ** 2)))
        vm_ex = von_mises(np.concatenate([s_ex, nu * (s_ex[..., :1] + s_ex[..., 1:2])], -1))
        vm_max.append(np.abs(von_mises(sol.stress) - vm_ex).max())
    rates = np.log2(np.array(rms[:-1]) / np.array(rms[1:]))
    assert rates[0] > 1.6 and rates[1] > 1.85, rates  # measured 1.75, 1.99
    assert vm_max[-1] < 0.02 * 3 * S and vm_max[-1] < vm_max[0] / 5, vm_max  # peak of Kirsch vm: ~3 S


def test_symmetric_void_gives_mirror_symmetric_stress():
    # A void with r(pi - theta) = r(theta) (cos modes of even k, sin modes of odd k) under the
    # symmetric load must give a von Mises field symmetric about x = 1/2 (the mesh is mirror symmetric
    # when n_theta is divisible by 8): node (i, j) mirrors to (i, n_theta/4 - j mod n_theta).
    g = get_generator("elasticity")
    cfg = g.make_config(n_theta=32, n_rings=5, n_modes=4)
    modes = g.radius_modes(cfg, 0, seed=11)
    k = np.repeat(np.arange(1, 5), 2)
    is_cos = np.tile([True, False], 4)
    keep = np.where(is_cos, k % 2 == 0, k % 2 == 1)
    modes[1:][~keep] = 0.0
    pos, vm, _ = g.solve(cfg, modes)
    pos = pos.reshape(cfg.n_rings, cfg.n_theta, 2)
    vm = vm.reshape(cfg.n_rings, cfg.n_theta)
    mirror = (cfg.n_theta // 4 - np.arange(cfg.n_theta)) % cfg.n_theta
    np.testing.assert_allclose(pos[:, mirror, 0], 1 - pos[..., 0], atol=1e-12)
    np.testing.assert_allclose(pos[:, mirror, 1], pos[..., 1], atol=1e-12)
    assert np.abs(vm[:, mirror] - vm).max() < 1e-9 * vm.max()
    # and an asymmetric void does not give a symmetric field
    pos2, vm2, _ = g.solve(cfg, g.radius_modes(cfg, 0, seed=11))
    vm2 = vm2.reshape(cfg.n_rings, cfg.n_theta)
    assert np.abs(vm2[:, mirror] - vm2).max() > 1e-2 * vm2.max()


def test_generated_sample_balances_the_load_and_matches_its_void():
    # Virtual work with v = (0, y) and v = (y, 0) (both vanish on the fixed bottom edge): the FE stress
    # satisfies int sigma_yy dA = traction * 1 and int sigma_xy dA = 0 exactly, and the L2 projection
    # preserves integrals. The void ring of the stored points lies on r(theta) of the stored modes.
    import skfem

    g = get_generator("elasticity")
    cfg = g.make_config(n_theta=32, n_rings=5, n_modes=4, traction=100.0)
    out = g.generate(cfg, np.array([4]), seed=2, device="cpu")
    modes = out["params/radius_modes"][0].astype(np.float64)
    np.testing.assert_allclose(modes, g.radius_modes(cfg, 4, 2), rtol=1e-6)
    pos, vm, sol = g.solve(cfg, g.radius_modes(cfg, 4, 2))
    np.testing.assert_allclose(out["fields/pos"][0], pos, rtol=1e-6)
    np.testing.assert_allclose(out["fields/sigma"][0, :, 0], vm, rtol=1e-5)
    X = void_cell_grid(radius_function(g.radius_modes(cfg, 4, 2), cfg.r_min, cfg.r_max), cfg.n_theta, cfg.n_rings)
    m = structured_p2_mesh(X, periodic=True)
    b1 = skfem.Basis(m.mesh, skfem.ElementTriP1(), intorder=4)
    w = skfem.BilinearForm(lambda u, v, _: u * v).assemble(b1) @ np.ones(b1.N)  # int of each hat function
    w = w[m.dof[::2, ::2]]
    area = 1.0 - skfem.Functional(lambda _: 1.0).assemble(b1)
    assert 0.5 * 0.2**2 * np.pi < area < np.pi * 0.4**2  # the void's area
    assert abs((w * sol.stress[..., 1]).sum() - 100.0) < 1e-9 * 100
    assert abs((w * sol.stress[..., 2]).sum()) < 1e-9 * 100
    p = out["fields/pos"][0].astype(np.float64).reshape(cfg.n_rings, cfg.n_theta, 2) - 0.5
    theta = np.arctan2(p[0, :, 1], p[0, :, 0])
    r = radius_function(modes, cfg.r_min, cfg.r_max)(theta)
    np.testing.assert_allclose(np.hypot(p[0, :, 0], p[0, :, 1]), r, rtol=1e-5)
    assert np.all((r > cfg.r_min) & (r < cfg.r_max))
    outer = p[-1] + 0.5
    assert (np.isclose(outer, 0, atol=1e-7) | np.isclose(outer, 1, atol=1e-7)).any(axis=1).all()  # on the square


def test_generator_shapes_and_determinism():
    g = get_generator("elasticity")
    assert g.inputs == ("pos",) and g.targets == ("sigma",) and g.coords(g.make_config()) == {}
    cfg = g.make_config(n_theta=16, n_rings=3, n_modes=2)
    out = g.generate(cfg, np.arange(3), seed=5, device="cpu")
    assert out["fields/pos"].shape == (3, 48, 2) and out["fields/sigma"].shape == (3, 48, 1)
    assert out["params/radius_modes"].shape == (3, 5)
    assert all(v.dtype == np.float32 for v in out.values())
    assert np.all(out["fields/sigma"] >= 0) and not np.allclose(out["fields/pos"][0], out["fields/pos"][1])
    alone = g.generate(cfg, np.array([1]), seed=5, device="cpu")
    for key in out:
        np.testing.assert_array_equal(alone[key][0], out[key][1])
    other = g.generate(cfg, np.array([1]), seed=6, device="cpu")
    assert not np.array_equal(other["fields/pos"][0], out["fields/pos"][1])
    assert g.make_config().n_theta * g.make_config().n_rings == 972  # Geo-FNO's point count by default


@pytest.mark.parametrize(
    "bad",
    [
        dict(r_max=0.5),
        dict(r_min=0.3, r_max=0.25),
        dict(r_min=0.0),
        dict(youngs_modulus=0.0),
        dict(youngs_modulus=-1e6),
        dict(poisson_ratio=0.5),
        dict(poisson_ratio=-1.0),
        dict(n_theta=30),
        dict(n_theta=4),
        dict(n_rings=1),
        dict(n_theta=32, n_modes=8),
        dict(plane="axisymmetric"),
        dict(grading=0.0),
        dict(radius_tau=0.0),
        dict(n_thetas=32),
    ],
)
def test_impossible_configs_are_refused(bad):
    with pytest.raises(ConfigError):
        get_generator("elasticity").make_config(**bad)
