import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp

from neurodyn.data.generators import get_generator
from neurodyn.data.generators.ks import etdrk4_solve, ks_linear, ks_nonlinear_symbol
from neurodyn.errors import ConfigError, DataError


def _numpy_ks_rhs(n, length, nu):
    """Independent right-hand side of u_t = -u u_x - u_xx - nu u_xxxx (numpy FFTs, 2/3-rule on u^2)."""
    k = np.arange(n // 2 + 1)
    q = 2 * np.pi * k / length
    keep = k <= (n - 1) // 3

    def rhs(t, u):
        v = np.fft.rfft(u)
        return np.fft.irfft((q**2 - nu * q**4) * v - 0.5j * q * keep * np.fft.rfft(u * u), n=n)

    return rhs


def test_etdrk4_agrees_with_a_stiff_radau_solve():
    g = get_generator("ks")
    cfg = g.make_config(length=16.0, resolution=64, nu=[0.1, 0.2], t_final=0.5, n_frames=6, dt=1e-3)
    ids = np.arange(2)
    out = g.generate(cfg, ids, seed=3, device="cpu")
    np.testing.assert_array_equal(out["params/nu"], np.float32([0.1, 0.2]))
    u0 = g.initial_condition(cfg, ids, 3, "cpu")
    exact64 = g.solve(cfg, u0, np.array([0.1, 0.2])).numpy()
    t = g.frame_times(cfg)
    for b, nu in enumerate((0.1, 0.2)):
        sol = solve_ivp(
            _numpy_ks_rhs(64, 16.0, nu), (0.0, t[-1]), u0[b].numpy(), method="Radau", t_eval=t, rtol=1e-10, atol=1e-12
        )
        assert sol.success
        ref = sol.y.T
        assert np.abs(ref).max() > 1.0  # not a trivial solution
        assert np.linalg.norm(exact64[b] - ref) / np.linalg.norm(ref) < 1e-8  # ETDRK4 dt=1e-3 vs Radau
        rel = np.linalg.norm(out["fields/u"][b, ..., 0] - ref, axis=1) / np.linalg.norm(ref, axis=1)
        assert rel.max() < 1e-6, rel  # the stored float32 data


@pytest.mark.parametrize("n,length,rate", [(32, 16.0, 3.9), (64, 16.0, 3.7)])
def test_etdrk4_is_fourth_order_in_dt(n, length, rate):
    # n = 64: ETDRK4's stiff pre-asymptotic regime (h * nu q^4 up to ~30); the rate climbs 3.1 -> 3.9 -> 4
    nu, t = 0.1, 0.5
    x = torch.arange(n, dtype=torch.float64) * length / n
    u0 = (torch.sin(2 * np.pi * x / length) + 0.6 * torch.cos(6 * np.pi * x / length + 0.3))[None]
    lin, g = ks_linear(n, length, nu), ks_nonlinear_symbol(n, length)
    ref = etdrk4_solve(u0, lin, g, t / 4000, 4000, 4000)[0, -1]
    steps = (80, 160, 320) if n == 64 else (10, 20, 40, 80)
    err = np.array([((etdrk4_solve(u0, lin, g, t / s, s, s)[0, -1] - ref).norm() / ref.norm()).item() for s in steps])
    rates = np.log2(err[:-1] / err[1:])
    assert np.all(rates > rate) and np.all(rates < 4.2), (err, rates)


def test_generator_layout_viscosity_cycling_and_determinism():
    g = get_generator("ks")
    cfg = g.make_config(resolution=64, solve_resolution=512, nu=[0.075, 0.125], t_final=0.4, n_frames=5, dt=0.005)
    out = g.generate(cfg, np.arange(3), seed=1, device="cpu")
    u = out["fields/u"]
    assert u.shape == (3, 5, 64, 1) and u.dtype == np.float32
    np.testing.assert_array_equal(out["params/nu"], np.float32([0.075, 0.125, 0.075]))
    c = g.coords(cfg)
    np.testing.assert_allclose(c["t"], [0.0, 0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(c["x"], np.arange(64) * 1.0)  # x_j = j L / N, L = 64
    u0 = g.initial_condition(cfg, np.arange(3), 1, "cpu").numpy()
    np.testing.assert_array_equal(u[:, 0, :, 0], u0[:, ::8].astype(np.float32))
    full = g.solve(cfg, torch.as_tensor(u0), g.sample_nu(cfg, np.arange(3)))
    assert full.mean(dim=2).abs().max() < 1e-13  # the mean (0) is conserved
    np.testing.assert_allclose(u[..., 0], full[:, :, ::8].numpy(), rtol=0, atol=1e-6)
    alone = g.generate(cfg, np.array([2]), seed=1, device="cpu")
    np.testing.assert_allclose(alone["fields/u"][0], u[2], rtol=0, atol=1e-6)
    assert not np.array_equal(g.generate(cfg, np.array([2]), seed=2, device="cpu")["fields/u"][0], u[2])
    assert g.tag(cfg) == "nu0.075-0.125_r64from512"


@pytest.mark.parametrize("init,waves,kmax", [("stssm", 21, 8), ("lpsda", 10, 7)])
def test_initial_conditions_follow_the_recipe(init, waves, kmax):
    g = get_generator("ks")
    cfg = g.make_config(resolution=64, length=16.0, init=init)
    u0 = g.initial_condition(cfg, np.arange(2000), 0, "cpu").numpy()
    spec = np.abs(np.fft.rfft(u0, axis=1)) / 64
    assert spec[:, 0].max() < 1e-12 and spec[:, kmax + 1 :].max() < 1e-12  # zero mean, k <= k_max
    assert spec[:, kmax].max() > 0.1  # and k_max does occur
    # E[u0^2] = waves * E[A^2] / 2 with A ~ U[-0.5, 0.5]: waves / 24
    assert abs(np.mean(u0**2) / (waves / 24) - 1) < 0.05


def test_blow_up_is_reported_with_sample_and_seed():
    u0 = torch.zeros(2, 32, dtype=torch.float64)
    u0[1, 3] = float("nan")
    with pytest.raises(DataError, match=r"sample 9 .*seed 4"):
        etdrk4_solve(u0, ks_linear(32, 16.0, 0.1), ks_nonlinear_symbol(32, 16.0), 0.01, 10, 5, ids=[8, 9], seed=4)


@pytest.mark.parametrize(
    "bad",
    [
        dict(nu=-0.1),
        dict(nu=0.0),
        dict(nu=[0.1, -1.0]),
        dict(nu=[]),
        dict(resolution=128),  # too coarse for nu = 0.1, L = 64
        dict(resolution=64, length=16.0, init="stssm", k_max=30),
        dict(resolution=64, solve_resolution=500),
        dict(resolution=511, length=16.0),
        dict(dt=0.003),
        dict(dt=0.05),
        dict(dt=0.0),
        dict(n_frames=1),
        dict(t_final=-1.0),
        dict(init="kdv"),
        dict(length=0.0),
        dict(visc=0.1),
    ],
)
def test_impossible_configs_are_refused(bad):
    with pytest.raises(ConfigError):
        get_generator("ks").make_config(**bad)
