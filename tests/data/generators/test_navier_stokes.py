"""Oracles for the torus Navier-Stokes generators (navier_stokes, torus_vis, torus_vis_force).

Exact solutions (Taylor-Green decay, the forced single-shell flow, the advection term of a two-mode
field), a conservation law (mean vorticity), an independent solver (scipy's adaptive Runge-Kutta on
the same Fourier-Galerkin system written with numpy's complex FFT), convergence under refinement
in time (first order) and space (spectral), and the GRF's spectrum.
"""

import math

import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp

from neurodyn.data.generators import get_generator, sample_rng
from neurodyn.data.generators.grf import periodic_grf_2d
from neurodyn.data.generators.navier_stokes import (
    FNO_GRF_SIGMA,
    SolverBlowUp,
    SpectralForcing,
    li_forcing,
    random_forcing_quadratures,
    solve_vorticity,
)
from neurodyn.data.generators.spectral import (
    dealias_mask_2d,
    derivative_wavenumbers,
    max_dealiased_wavenumber,
    nested_normals_2d,
)
from neurodyn.errors import ConfigError, DataError

TWO_PI = 2 * math.pi


def _grid(n):
    return torch.arange(n, dtype=torch.float64) / n


def test_taylor_green_vortex_decays_exactly():
    # w = 2K cos(Kx) cos(Ky) is a steady Euler flow (u.grad w = 0); with viscosity it decays as
    # exp(-2 nu K^2 t). Crank-Nicolson multiplies it by ((1 - a) / (1 + a))^n, a = nu K^2 dt exactly.
    n, nu, dt, steps = 32, 0.01, 1e-3, 1000
    x = _grid(n)
    w0 = []
    for m, amp in ((1, 3.0), (2, 1.0), (3, 5.0)):
        k = TWO_PI * m
        w0.append(amp * 2 * k * torch.cos(k * x)[:, None] * torch.cos(k * x)[None, :])
    w0 = torch.stack(w0)
    out = solve_vorticity(w0, nu, None, dt, steps, steps // 2)
    for b, m in enumerate((1, 2, 3)):
        k2 = 2 * (TWO_PI * m) ** 2
        a = 0.5 * dt * nu * k2
        discrete = w0[b] * ((1 - a) / (1 + a)) ** steps
        exact = w0[b] * math.exp(-nu * k2 * dt * steps)
        scale = w0[b].abs().max()
        assert (out[b, -1] - discrete).abs().max() / scale < 1e-11
        assert (out[b, -1] - exact).abs().max() / exact.abs().max() < 1e-4  # CN error 2 a^3 n / 3 ~ 3e-5
    assert out.shape == (3, 3, n, n)


def test_forced_single_shell_flow_is_exact():
    # From rest, FNO's forcing f = 0.1 (sin + cos)(2 pi (x + y)) drives w = f / (nu L) (1 - exp(-nu L t)),
    # L = 8 pi^2; u.grad w = 0 since w stays in one shell. The scheme's fixed point is exactly f / (nu L).
    n, nu, dt, steps = 16, 0.05, 1e-3, 2000
    x = _grid(n)
    f = li_forcing(x, x)
    forcing = SpectralForcing(torch.fft.rfft2(f)[None])
    out = solve_vorticity(torch.zeros(1, n, n, dtype=torch.float64), nu, forcing, dt, steps, steps // 4)
    lam = 8 * math.pi**2
    a = 0.5 * dt * nu * lam
    for r in range(5):
        t = r * steps // 4 * dt
        steady = f / (nu * lam)
        discrete = steady * (1 - ((1 - a) / (1 + a)) ** (r * steps // 4))
        exact = steady * (1 - math.exp(-nu * lam * t))
        assert (out[0, r] - discrete).abs().max() < 1e-12 * steady.abs().max() + 1e-15
        assert (out[0, r] - exact).abs().max() < 2e-3 * steady.abs().max()  # first order in dt


def test_advection_term_of_a_two_mode_field():
    # w = sin(2 pi x) + cos(4 pi y): psi = sin(2 pi x)/(4 pi^2) + cos(4 pi y)/(16 pi^2), u = psi_y, v = -psi_x,
    # so u.grad w = 1.5 cos(2 pi x) sin(4 pi y). With nu = 0 and no forcing one step is w - dt u.grad w.
    n, dt = 16, 1e-6
    x = _grid(n)
    X, Y = x[:, None], x[None, :]
    w0 = (torch.sin(TWO_PI * X) + torch.cos(2 * TWO_PI * Y))[None]
    out = solve_vorticity(w0, 0.0, None, dt, 1, 1)
    adv = (w0[0] - out[0, 1]) / dt
    want = 1.5 * torch.cos(TWO_PI * X) * torch.sin(2 * TWO_PI * Y)
    assert (adv - want).abs().max() < 1e-8


def _band_limited_field(n, kmax, seed, amp):
    rng = np.random.default_rng(seed)
    x = np.arange(n) / n
    X, Y = np.meshgrid(x, x, indexing="ij")
    w = np.zeros((n, n))
    for kx in range(-kmax, kmax + 1):
        for ky in range(0, kmax + 1):
            if ky == 0 and kx <= 0:
                continue
            a, b = rng.normal(size=2) * amp / (kx * kx + ky * ky)
            w += a * np.cos(TWO_PI * (kx * X + ky * Y)) + b * np.sin(TWO_PI * (kx * X + ky * Y))
    return w


def _reference_rhs(n, nu, f_c, f_s, delta):
    """RHS of the dealiased Fourier-Galerkin system, written independently with numpy's complex FFT."""
    k = np.fft.fftfreq(n, d=1.0 / n)
    KX, KY = np.meshgrid(k, k, indexing="ij")
    lap = 4 * np.pi**2 * (KX**2 + KY**2)
    inv = np.where(lap > 0, 1 / np.where(lap > 0, lap, 1), 0.0)
    keep = (np.abs(KX) <= n / 3) & (np.abs(KY) <= n / 3)
    fc_h, fs_h = np.fft.fft2(f_c), np.fft.fft2(f_s)

    def rhs(t, w):
        wh = np.fft.fft2(w.reshape(n, n))
        psi = wh * inv
        u = np.fft.ifft2(2j * np.pi * KY * psi).real
        v = np.fft.ifft2(-2j * np.pi * KX * psi).real
        wx = np.fft.ifft2(2j * np.pi * KX * wh).real
        wy = np.fft.ifft2(2j * np.pi * KY * wh).real
        nl = np.fft.fft2(u * wx + v * wy) * keep
        d = -nl - nu * lap * wh + np.cos(delta * t) * fc_h + np.sin(delta * t) * fs_h
        return np.fft.ifft2(d).real.ravel()

    return rhs


def test_matches_an_independent_solver_with_first_order_in_time():
    # Band-limited initial field, FFNO's drifting forcing with a fast drift: compare with scipy's DOP853
    # (rtol 1e-11) on the same semi-discrete system; the CN / explicit-Euler scheme is first order.
    n, nu, delta, t_end = 16, 0.01, 3.0, 0.5
    w0 = _band_limited_field(n, 3, seed=1, amp=4.0)
    amps = torch.as_tensor(np.random.default_rng(2).uniform(size=(1, 12)))
    f_c, f_s = random_forcing_quadratures(amps, _grid(n), _grid(n), scale=0.5)
    ref = (
        solve_ivp(
            _reference_rhs(n, nu, f_c[0].numpy(), f_s[0].numpy(), delta),
            (0, t_end),
            w0.ravel(),
            method="DOP853",
            rtol=1e-11,
            atol=1e-12,
        )
        .y[:, -1]
        .reshape(n, n)
    )
    forcing = SpectralForcing(torch.fft.rfft2(f_c), torch.fft.rfft2(f_s), delta)
    errs = []
    for dt in (2e-3, 1e-3, 5e-4):
        steps = int(round(t_end / dt))
        out = solve_vorticity(torch.as_tensor(w0)[None], nu, forcing, dt, steps, steps)
        errs.append(np.linalg.norm(out[0, -1].numpy() - ref) / np.linalg.norm(ref))
    rates = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert errs[-1] < 2e-3, errs
    assert np.all(np.abs(rates - 1.0) < 0.15), (errs, rates)


def test_mean_vorticity_is_conserved():
    n = 32
    w0 = periodic_grf_2d(torch.randn(2, n, n, 2, dtype=torch.float64), n, 2.5, 7.0, FNO_GRF_SIGMA) + 0.37
    amps = torch.rand(2, 12, dtype=torch.float64)
    f_c, f_s = random_forcing_quadratures(amps, _grid(n), _grid(n), 0.1)
    forcing = SpectralForcing(torch.fft.rfft2(f_c), torch.fft.rfft2(f_s), 0.2)
    out = solve_vorticity(w0, torch.tensor([1e-3, 1e-4]), forcing, 1e-3, 300, 50)
    means = out.mean(dim=(-2, -1))
    assert (means - w0.mean(dim=(-2, -1))[:, None]).abs().max() < 1e-13
    assert (out[:, -1] - out[:, 0]).abs().max() > 1e-2  # the field did evolve


def _smooth_initial(n):
    X, Y = _grid(n)[:, None], _grid(n)[None, :]
    return (
        torch.sin(TWO_PI * X) * torch.cos(TWO_PI * Y)
        + 0.8 * torch.cos(2 * TWO_PI * Y + 0.3)
        + 0.6 * torch.sin(TWO_PI * (X + 2 * Y))
        + 0.5 * torch.cos(TWO_PI * (2 * X - Y))
    )[None]


def test_spectral_convergence_under_refinement():
    # The same analytic initial field and forcing at 32, 64 and 128 points (same dt): the error against the
    # 128 solution on the common 32-point grid drops by orders of magnitude per doubling.
    dt, steps = 4e-3, 250
    sol = {}
    for n in (32, 64, 128):
        x = _grid(n)
        forcing = SpectralForcing(torch.fft.rfft2(li_forcing(x, x))[None])
        sol[n] = solve_vorticity(_smooth_initial(n), 1e-3, forcing, dt, steps, steps, stride=n // 32)[0, -1]
    scale = sol[128].norm()
    e32, e64 = ((sol[32] - sol[128]).norm() / scale).item(), ((sol[64] - sol[128]).norm() / scale).item()
    assert 1e-7 < e32 < 1e-3, e32  # resolved but not exactly
    assert e64 < 1e-8 and e64 < 1e-4 * e32, (e32, e64)


def test_periodic_grf_has_the_prescribed_spectrum():
    # E |w_hat_k|^2 = sigma^2 (4 pi^2 |k|^2 + tau^2)^(-alpha) for w_hat = rfft2(w) / n^2; zero mean.
    n, alpha, tau, sigma, m = 16, 2.5, 7.0, 3.0, 4000
    w = periodic_grf_2d(torch.randn(m, n, n, 2, dtype=torch.float64), n, alpha, tau, sigma)
    var = (torch.fft.rfft2(w) / n**2).abs().pow(2).mean(0)
    k = torch.fft.fftfreq(n, 1 / n, dtype=torch.float64)[:, None]
    l = torch.fft.rfftfreq(n, 1 / n, dtype=torch.float64)[None, :]
    want = sigma**2 * (4 * math.pi**2 * (k**2 + l**2) + tau**2) ** (-alpha)
    assert var[0, 0] < 1e-28 and w.mean(dim=(1, 2)).abs().max() < 1e-12
    rel = (var / want)[(k**2 + l**2) > 0]
    assert (rel - 1).abs().max() < 0.15  # 4000 samples: ~2-3 % per mode, 144 modes
    assert abs(rel.mean().item() - 1) < 0.01


def test_initial_vorticity_has_the_law_of_fnos_sampler():
    # FNO's GaussianRF(2, s, alpha=2.5, tau=7) takes Re(ifft2(s^2 sqrt(2) sigma c_k xi_k)), xi_k complex with
    # N(0, 1) real and imaginary parts, sigma = tau^((2 alpha - 2) / 2) = 7^1.5, c_k = (4 pi^2 |k|^2 + 49)^(-5/4):
    # hence E |w_hat_k|^2 = 2 sigma^2 c_k^2 -- twice the nominal N(0, 7^3 (-Lap + 49)^-2.5).
    g = get_generator("navier_stokes")
    cfg = g.make_config(resolution=16, sim_resolution=16, nu=1e-3, dt=1e-2, t_final=1.0)
    w0 = g.initial_vorticity(cfg, [sample_rng(0, i) for i in range(3000)], torch.device("cpu"))
    var = (torch.fft.rfft2(w0) / 16**2).abs().pow(2).mean(0)
    k = torch.fft.fftfreq(16, 1 / 16, dtype=torch.float64)[:, None]
    l = torch.fft.rfftfreq(16, 1 / 16, dtype=torch.float64)[None, :]
    want = 2 * 7.0**3 * (4 * math.pi**2 * (k**2 + l**2) + 49.0) ** (-2.5)
    rel = (var / want)[(k**2 + l**2) > 0]
    assert abs(rel.mean().item() - 1) < 0.015 and (rel - 1).abs().max() < 0.2


def test_grf_draws_are_nested_across_resolutions():
    # The low modes of sample i do not depend on the simulation grid.
    a, b = nested_normals_2d(sample_rng(3, 7), 16), nested_normals_2d(sample_rng(3, 7), 64)
    idx = torch.fft.fftfreq(16, 1 / 16).long()[1:8]  # wavenumbers 1..7 and -7..-1 of both grids
    idx = torch.cat([torch.tensor([0]), idx, -idx])
    assert torch.equal(a[idx[:, None] % 16, idx[None, :] % 16], b[idx[:, None] % 64, idx[None, :] % 64])


def test_spectral_helpers_follow_fno_conventions():
    # 256 points: the 2/3 rule keeps |k_x|, |k_y| <= 85; the Nyquist mode has no derivative.
    m = dealias_mask_2d(256)
    assert m.shape == (256, 129) and max_dealiased_wavenumber(256) == 85
    assert m[85, 85] and not m[86, 0] and not m[0, 86] and m[256 - 85, 0] and not m[256 - 86, 0]
    assert int(m.sum()) == (2 * 85 + 1) * 86
    k = derivative_wavenumbers(8)
    assert k.tolist() == [0, 1, 2, 3, 0, -3, -2, -1] and derivative_wavenumbers(8, rfft=True).tolist() == [
        0,
        1,
        2,
        3,
        0,
    ]


def _tiny(name, **kw):
    base = dict(resolution=8, sim_resolution=16, t_final=2.0, record_every=1.0, dt=1e-2)
    base.update(kw)
    return get_generator(name).make_config(**base)


def test_torus_vis_force_layout_context_and_determinism():
    g = get_generator("torus_vis_force")
    cfg = _tiny("torus_vis_force")
    out = g.generate(cfg, np.arange(3), seed=5, device="cpu")
    assert out["fields/u"].shape == (3, 3, 8, 8, 1) and out["fields/u"].dtype == np.float32
    assert out["fields/f"].shape == (3, 3, 8, 8, 1)
    nu, amps = out["params/nu"], out["params/forcing_amplitudes"]
    assert nu.shape == (3,) and np.all((nu >= 1e-5) & (nu < 1e-4)) and len(set(nu.tolist())) == 3
    assert amps.shape == (3, 12) and np.all((amps >= 0) & (amps <= 1))
    # frame 0 is the GRF at every 2nd point of the 16-point simulation grid
    rng = sample_rng(5, 1)
    assert torch.rand(1, generator=rng, dtype=torch.float64).item() * 9e-5 + 1e-5 == pytest.approx(nu[1], rel=1e-6)
    np.testing.assert_allclose(torch.rand(12, generator=rng, dtype=torch.float64).numpy(), amps[1], rtol=1e-6)
    w0 = periodic_grf_2d(nested_normals_2d(rng, 16)[None], 16, 2.5, 7.0, FNO_GRF_SIGMA)[0, ::2, ::2]
    np.testing.assert_allclose(out["fields/u"][1, 0, ..., 0], w0.numpy(), rtol=1e-6, atol=1e-7)
    # the stored forcing is FFNO's formula at each snapshot time t = 0, 1, 2 (delta = 0.2)
    x = np.arange(8) / 8
    X, Y = np.meshgrid(x, x, indexing="ij")
    a = amps[2].astype(np.float64)
    for t in range(3):
        f = 0
        for p in (1, 2):
            for m, th in enumerate((X, Y, X + Y)):
                arg = TWO_PI * p * th + 0.2 * t
                f = f + a[6 * (p - 1) + 2 * m] * np.sin(arg) + a[6 * (p - 1) + 2 * m + 1] * np.cos(arg)
        np.testing.assert_allclose(out["fields/f"][2, t, ..., 0], 0.1 * f, atol=1e-6)
    assert not np.allclose(out["fields/f"][2, 0], out["fields/f"][2, 2])
    # a sample is the same alone or inside a chunk, and differs with the seed
    alone = g.generate(cfg, np.array([1]), seed=5, device="cpu")
    for key in out:
        np.testing.assert_array_equal(alone[key][0], out[key][1])
    other = g.generate(cfg, np.array([1]), seed=6, device="cpu")
    assert not np.array_equal(other["fields/u"][0], out["fields/u"][1])
    # viscosity and forcing do not depend on the simulation grid
    finer = g.generate(_tiny("torus_vis_force", sim_resolution=32), np.array([1]), seed=5, device="cpu")
    for key in ("params/nu", "params/forcing_amplitudes", "fields/f"):
        np.testing.assert_array_equal(finer[key][0], out[key][1])


def test_navier_stokes_and_torus_vis_layouts(data_dir):
    g = get_generator("navier_stokes")
    cfg = _tiny("navier_stokes", nu=1e-3)
    path = g.run(cfg, 3, seed=0, chunk_size=2, progress=False)
    import h5py

    with h5py.File(path, "r") as h:
        u, f, nu = h["fields/u"][:], h["fields/f"][:], h["params/nu"][:]
        np.testing.assert_allclose(h["coords/t"][:], [0.0, 1.0, 2.0])
        np.testing.assert_allclose(h["coords/x"][:], np.arange(8) / 8)
    assert u.shape == (3, 3, 8, 8, 1) and f.shape == (3, 8, 8, 1) and np.all(nu == np.float32(1e-3))
    np.testing.assert_allclose(f[1, ..., 0], li_forcing(_grid(8), _grid(8)).numpy(), atol=1e-7)
    tv = get_generator("torus_vis").generate(_tiny("torus_vis"), np.arange(2), seed=0, device="cpu")
    assert tv["fields/f"].shape == (2, 8, 8, 1) and tv["fields/u"].shape == (2, 3, 8, 8, 1)


def test_blow_up_names_the_sample_and_seed():
    g = get_generator("navier_stokes")
    cfg = _tiny("navier_stokes", nu=1e-5, t_final=20.0, dt=0.5, grf_sigma=500.0, max_cfl=1e9)
    with pytest.raises(DataError, match=r"sample 4 \(seed 9\) blew up"):
        g.generate(cfg, np.array([4]), seed=9, device="cpu")
    with pytest.raises(SolverBlowUp):
        solve_vorticity(torch.full((1, 8, 8), float("nan"), dtype=torch.float64), 1e-3, None, 1e-3, 5, 5)


def test_numeric_strings_are_accepted():
    cfg = get_generator("navier_stokes").make_config(nu="1e-3", sim_resolution="64", resolution=64, dt="1e-3")
    assert cfg.nu == 1e-3 and cfg.sim_resolution == 64 and cfg.dt == 1e-3


@pytest.mark.parametrize(
    "name,bad",
    [
        ("navier_stokes", dict(nu=-1e-3)),
        ("navier_stokes", dict(nu=0.0)),
        ("navier_stokes", dict(resolution=64, sim_resolution=100)),
        ("navier_stokes", dict(resolution=7, sim_resolution=21)),
        ("navier_stokes", dict(dt=3e-4)),  # record_every is not a whole number of steps
        ("navier_stokes", dict(t_final=20.5)),  # t_final not a multiple of record_every
        ("navier_stokes", dict(dt=0.1, record_every=1.0)),  # CFL: U dt / dx >> 1 at 256 points
        ("navier_stokes", dict(forcing="kolmogorov")),
        ("navier_stokes", dict(nu="abc")),
        ("navier_stokes", dict(grf_alpha=1.0)),
        ("navier_stokes", dict(viscosity=1e-3)),
        ("torus_vis", dict(nu_min=1e-4, nu_max=1e-5)),
        ("torus_vis", dict(nu_min=-1e-5)),
        ("torus_vis", dict(forcing_cycles=0)),
        ("torus_vis", dict(sim_resolution=8, resolution=8, forcing_cycles=3, dt=1e-2)),  # outside the 2/3 band
        ("torus_vis_force", dict(dt=0.05)),
    ],
)
def test_impossible_configs_are_refused(name, bad):
    with pytest.raises(ConfigError):
        get_generator(name).make_config(**bad)


@pytest.mark.parametrize(
    "preset",
    [
        "data/navier_stokes",
        "data/navier_stokes_nu1e-3",
        "data/navier_stokes_nu1e-4",
        "data/torus_vis",
        "data/torus_vis_force",
    ],
)
@pytest.mark.parametrize("scale", ["tiny", "cpu", "paper"])
def test_presets_are_valid(preset, scale):
    from neurodyn.data.assembly import data_options
    from neurodyn.experiments import load_experiment

    d = load_experiment(preset, scale)["data"]
    cfg = get_generator(d["generator"]).make_config(**data_options(d))
    if scale == "paper":
        assert cfg.sim_resolution == 256 and cfg.resolution == 64 and cfg.dt == 1e-4
    else:
        assert cfg.sim_resolution <= 64
