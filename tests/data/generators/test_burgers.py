import math

import numpy as np
import pytest
import torch

from neurodyn.data.generators import get_generator
from neurodyn.data.generators.burgers import solve_burgers
from neurodyn.errors import ConfigError, DataError


def _integral_u0(x):
    """U(x) = int_0^x u0 for u0 = sin(2 pi x) + 0.5 sin(4 pi x + 1) (zero mean, so phi0 is periodic)."""
    return (1 - np.cos(2 * np.pi * x)) / (2 * np.pi) + 0.5 * (np.cos(1.0) - np.cos(4 * np.pi * x + 1.0)) / (4 * np.pi)


def _cole_hopf_cell_averages(n, t, nu, m=2048):
    """Exact cell averages of u_t + u u_x = nu u_xx on n cells of [0, 1) at time t.

    u = -2 nu (log phi)_x with phi_t = nu phi_xx, phi0 = exp(-U / (2 nu)); the average of u over a cell
    [a, b] is -2 nu (log phi(b) - log phi(a)) / (b - a). phi is evolved exactly in Fourier space (its
    coefficients from an m-point FFT of the analytic phi0, accurate to round-off).
    """
    xm = np.arange(m) / m
    c = np.fft.rfft(np.exp(-_integral_u0(xm) / (2 * nu))) / m
    k = np.arange(c.size)
    c = c * np.exp(-nu * (2 * np.pi * k) ** 2 * t) * np.where(k == 0, 1.0, 2.0)
    edges = np.arange(n + 1) / n
    phi = (c[None] * np.exp(2j * np.pi * k[None] * edges[:, None])).real.sum(1)
    return -2 * nu * np.diff(np.log(phi)) * n


@pytest.mark.parametrize(
    "limiter,flux,cells",
    [
        pytest.param("mc", "godunov", (256, 512, 1024), marks=pytest.mark.slow),
        ("minmod", "rusanov", (128, 256)),
        ("vanleer", "roe", (128, 256)),
    ],
)
def test_second_order_convergence_to_cole_hopf_solution(limiter, flux, cells):
    # nu = 0.01, t = 0.2: the front has steepened to |u_x| ~ 37 (about 1/nu) but is resolved
    nu, t = 0.01, 0.2
    errors = []
    for n in cells:
        u0 = torch.tensor(_cole_hopf_cell_averages(n, 0.0, nu))[None]
        u = solve_burgers(u0, [0.0, t], nu, cfl=0.5, limiter=limiter, flux=flux)[0, -1].numpy()
        errors.append(np.abs(u - _cole_hopf_cell_averages(n, t, nu)).mean())  # L1 error of cell averages
    rates = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(rates > 1.8) and np.all(rates < 2.2), (errors, rates)
    assert errors[-1] < (1.2e-5 if cells[-1] == 1024 else 5e-4), errors  # minmod is the most diffusive


def test_pdebench_regime_conserves_mean_and_is_tvd_with_a_maximum_principle():
    # nu = 0.001/pi (shocks of a few cells): the scheme is conservative, total-variation diminishing and
    # never creates new extrema; the stored frames are the solve at the frame times
    g = get_generator("burgers")
    cfg = g.make_config(resolution=256, t_final=0.7, n_frames=6)
    ids = np.arange(4)
    u0 = g.initial_condition(cfg, ids, 11, "cpu")
    u = solve_burgers(u0, g.frame_times(cfg), g.nu_eff(cfg), cfg.cfl)
    mean = u.mean(dim=2)
    assert (mean - mean[:, :1]).abs().max() < 1e-13
    tv = (u - u.roll(1, dims=2)).abs().sum(dim=2)
    assert torch.all(tv[:, 1:] <= tv[:, :-1] + 1e-12), tv
    assert torch.all(u.amax(dim=2) <= u0.amax(dim=1, keepdim=True) + 1e-12)
    assert torch.all(u.amin(dim=2) >= u0.amin(dim=1, keepdim=True) - 1e-12)
    assert torch.all(tv[:, -1] < 0.99 * tv[:, 0])  # shocks formed and dissipated variation
    out = g.generate(cfg, ids[:1], 11, "cpu")
    np.testing.assert_allclose(out["fields/u"][0, ..., 0], u[0].numpy(), rtol=0, atol=1e-6)


def test_pdebench_initial_conditions_follow_the_recipe():
    g = get_generator("burgers")
    cfg = g.make_config(resolution=128)
    u0 = g.initial_condition(cfg, np.arange(3000), 0, "cpu").numpy()
    x = g.coords(cfg)["x"]
    peak = np.abs(u0).max(axis=1)
    # the tanh window (probability 0.1) makes u0 ~ 0 near x = 0 (xL >= 0.1, width 0.01)
    windowed = np.abs(u0[:, x < 0.05]).max(axis=1) < 1e-3 * peak
    assert 0.07 < windowed.mean() < 0.13, windowed.mean()
    # a random sign: symmetric about 0
    assert abs(np.mean(u0[:, 0] > 0) - 0.5) < 0.05
    # wavenumbers not drawn add a random constant, so the mean is usually not 0 (PDEBench's init_multi)
    assert np.mean(np.abs(u0.mean(axis=1)) > 0.05) > 0.5
    # the PDEBench period is x_last - x_first: the first and last cell carry the same value (unless windowed)
    np.testing.assert_allclose(u0[~windowed, 0], u0[~windowed, -1], atol=1e-12)
    # the plain variant: periodic, zero mean, only wavenumbers 1..4
    s = g.initial_condition(g.make_config(resolution=128, init="sines"), np.arange(200), 0, "cpu").numpy()
    spec = np.abs(np.fft.rfft(s, axis=1)) / 128
    assert spec[:, 0].max() < 1e-12 and spec[:, 5:].max() < 1e-12 and spec[:, 1:5].max() > 0.4


def test_generator_layout_subsampling_and_determinism():
    g = get_generator("burgers")
    cfg = g.make_config(resolution=32, solve_resolution=128, t_final=0.3, n_frames=4)
    out = g.generate(cfg, np.arange(3), seed=5, device="cpu")
    assert out["fields/u"].shape == (3, 4, 32, 1) and out["fields/u"].dtype == np.float32
    np.testing.assert_array_equal(out["params/nu"], np.float32(0.001))
    c = g.coords(cfg)
    np.testing.assert_allclose(c["t"], [0.0, 0.1, 0.2, 0.3])
    np.testing.assert_allclose(c["x"], (np.arange(0, 128, 4) + 0.5) / 128)
    u0 = g.initial_condition(cfg, np.arange(3), 5, "cpu").numpy()
    np.testing.assert_array_equal(out["fields/u"][:, 0, :, 0], u0[:, ::4].astype(np.float32))
    alone = g.generate(cfg, np.array([1]), seed=5, device="cpu")
    np.testing.assert_array_equal(alone["fields/u"][0], out["fields/u"][1])
    other = g.generate(cfg, np.array([1]), seed=6, device="cpu")
    assert not np.array_equal(other["fields/u"][0], out["fields/u"][1])
    assert g.tag(cfg) == "nu0.001_r32from128"


def test_blow_up_is_reported_with_sample_and_seed():
    u0 = torch.zeros(2, 64, dtype=torch.float64)  # row 0 stays 0 (stable)
    u0[1] = torch.sin(2 * math.pi * (torch.arange(64, dtype=torch.float64) + 0.5) / 64)
    with pytest.raises(DataError, match=r"sample 7 .*seed 3"):
        # cfl 1.5 > 1 makes the diffusion number 0.75 > 0.5: unstable (validate refuses cfl > 0.5)
        solve_burgers(u0, [0.0, 0.5], 0.05, cfl=1.5, ids=[6, 7], seed=3)
    with pytest.raises(DataError, match="sample 6"):
        solve_burgers(torch.full((1, 64), float("nan"), dtype=torch.float64), [0.0, 0.1], 0.01, ids=[6])


@pytest.mark.parametrize(
    "bad",
    [
        dict(nu=-0.001),
        dict(resolution=4),
        dict(resolution=100, solve_resolution=1024),
        dict(cfl=0.8),
        dict(cfl=0.0),
        dict(n_frames=1),
        dict(t_final=0.0),
        dict(init="gauss"),
        dict(limiter="superbee"),
        dict(flux="hllc"),
        dict(resolution=32, n_modes=8),
        dict(viscosity=1.0),
    ],
)
def test_impossible_configs_are_refused(bad):
    with pytest.raises(ConfigError):
        get_generator("burgers").make_config(**bad)
