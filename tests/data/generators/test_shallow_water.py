import math

import numpy as np
import pytest
import torch

from neurodyn.data.generators import get_generator
from neurodyn.data.generators.shallow_water import solve_swe
from neurodyn.errors import ConfigError, DataError

G = 1.0


def _exact_dam_break(xi, hl, hr, g=G):
    """Exact (Stoker) solution h(x/t) of the 1-D shallow-water Riemann problem with hl > hr > 0, u = 0:
    a left rarefaction and a right shock around the middle depth hm solving
    2 (sqrt(g hm) - sqrt(g hl)) + (hm - hr) sqrt(g (hm + hr) / (2 hm hr)) = 0 (Newton)."""

    def phi(h):  # velocity jump across the two waves, and its derivative
        f_l = 2 * (math.sqrt(g * h) - math.sqrt(g * hl))
        d_l = math.sqrt(g / h)
        k = math.sqrt(g * (h + hr) / (2 * h * hr))
        f_r = (h - hr) * k
        d_r = k + (h - hr) * (g / (2 * h * hr) - g * (h + hr) / (2 * h * h * hr)) / (2 * k)
        return f_l + f_r, d_l + d_r

    hm = 0.5 * (hl + hr)
    for _ in range(50):
        f, d = phi(hm)
        hm -= f / d
    assert abs(phi(hm)[0]) < 1e-14
    cl, cm = math.sqrt(g * hl), math.sqrt(g * hm)
    um = 2 * (cl - cm)
    s = hm * um / (hm - hr)  # Rankine-Hugoniot (mass)
    fan = ((2 * cl - xi) / 3) ** 2 / g
    return np.where(xi < -cl, hl, np.where(xi < um - cm, fan, np.where(xi < s, hm, hr))), hm, s


def _planar(nx, ny, hl=2.0, hr=1.0, half=2.5):
    dx, dy = 2 * half / nx, 2 * half / ny
    x = -half + (np.arange(nx) + 0.5) * dx
    h = np.where(x < 0, hl, hr)[:, None].repeat(ny, 1)
    q = torch.zeros(1, 3, nx, ny, dtype=torch.float64)
    q[0, 0] = torch.tensor(h)
    return q, x, dx, dy


def test_exact_riemann_solver_satisfies_the_jump_conditions():
    h, hm, s = _exact_dam_break(np.array([0.0]), 2.0, 1.0)
    um = 2 * (math.sqrt(2.0) - math.sqrt(hm))
    # momentum Rankine-Hugoniot across the shock: s [hu] = [hu^2 + g h^2 / 2]
    assert abs(s * hm * um - (hm * um**2 + 0.5 * G * (hm**2 - 1.0))) < 1e-12
    assert 1.0 < hm < 2.0 and s > math.sqrt(G * 1.0)


@pytest.mark.parametrize("flux", ["hll", "rusanov"])
def test_planar_dam_break_converges_to_the_exact_riemann_solution(flux):
    errors = []
    for nx in (64, 128, 256, 512):
        q0, x, dx, dy = _planar(nx, 4)
        q = solve_swe(q0, dx, dy, [0.0, 0.5], G, 0.4, flux, "minmod")[0, -1]
        h = q[0].numpy()
        assert np.array_equal(h, h[:, :1].repeat(4, 1))  # stays exactly uniform in y
        assert np.abs(q[2].numpy()).max() == 0.0  # no transverse momentum appears
        exact, _, _ = _exact_dam_break(x / 0.5, 2.0, 1.0)
        errors.append(np.abs(h[:, 0] - exact).sum() * dx)
    errors = np.array(errors)
    assert errors[-1] < 0.012, errors  # observed 0.0099 (hll), 0.0107 (rusanov)
    assert np.all(errors[:-1] / errors[1:] > 1.7), errors  # observed ~1.9: first order in L1 with a shock


@pytest.mark.parametrize("limiter, lo, hi", [("minmod", 1.7, 2.5), ("mc", 1.7, 2.5), ("none", 0.8, 1.3)])
def test_smooth_planar_wave_converges_at_second_order(limiter, lo, hi):
    # self-convergence before any shock forms: h = 1 + 0.1 exp(-(x/0.3)^2), at rest, t = 0.3
    sols = {}
    for nx in (100, 200, 400, 800):
        dx = 5.0 / nx
        x = -2.5 + (np.arange(nx) + 0.5) * dx
        q0 = torch.zeros(1, 3, nx, 2, dtype=torch.float64)
        q0[0, 0] = torch.tensor(1 + 0.1 * np.exp(-((x / 0.3) ** 2)))[:, None]
        sols[nx] = solve_swe(q0, dx, 2.5, [0.0, 0.3], G, 0.4, "hll", limiter)[0, -1, 0, :, 0].numpy()

    def coarsen(v, f):
        return v.reshape(-1, f).mean(1)

    ref = sols[800]
    errs = [np.abs(sols[n] - coarsen(ref, 800 // n)).sum() * 5.0 / n for n in (100, 200, 400)]
    rate = np.log2(errs[0] / errs[1])
    assert lo < rate < hi, (rate, errs)  # observed 2.02 (minmod), 1.97 (mc), 1.09 (first order)


def test_radial_dam_break_conserves_mass_and_is_symmetric():
    g = get_generator("shallow_water")
    cfg = g.make_config(resolution=48)
    r = g.radii(cfg, np.arange(2), 0)
    q0 = g.initial_state(cfg, r)
    dx = 5.0 / 48
    # until t = 0.3 no signal, not even the smeared shock's numerical foot, has reached the boundary
    q = solve_swe(q0, dx, dx, np.linspace(0, 0.3, 4), G, cfg.cfl, cfg.flux, cfg.limiter)  # (2, 4, 3, 48, 48)
    assert q[:, :, 1:, 0].abs().max() < 1e-12
    mass = q[:, :, 0].sum((-1, -2)) * dx * dx
    assert ((mass - mass[:, :1]).abs() / mass[:, :1]).max() < 1e-14
    h, hu, hv = q[:, -1, 0], q[:, -1, 1], q[:, -1, 2]
    torch.testing.assert_close(h, h.transpose(1, 2), rtol=0, atol=1e-13)  # x <-> y
    torch.testing.assert_close(hu, hv.transpose(1, 2), rtol=0, atol=1e-13)
    torch.testing.assert_close(h, h.flip(1), rtol=0, atol=1e-13)  # x -> -x
    torch.testing.assert_close(hu, -hu.flip(1), rtol=0, atol=1e-13)
    assert hu.abs().max() > 0.05 and (h.amax((1, 2)) < 2.0).all() and (h.amin((1, 2)) > 0.5).all()


def test_generator_shapes_frames_params_and_determinism():
    g = get_generator("shallow_water")
    cfg = g.make_config(resolution=16, n_steps=4, t_end=0.2)
    out = g.generate(cfg, np.arange(3), seed=1, device="cpu")
    assert out["fields/u"].shape == (3, 5, 16, 16, 1) and out["params/radius"].shape == (3,)
    r = out["params/radius"]
    assert np.all((r >= 0.3) & (r <= 0.7))
    c = g.coords(cfg)
    np.testing.assert_allclose(c["t"], [0, 0.05, 0.1, 0.15, 0.2])
    np.testing.assert_allclose(c["x"][[0, -1]], [-2.5 + 5 / 32, 2.5 - 5 / 32])
    h0 = out["fields/u"][1, 0, ..., 0]
    inside = np.hypot(*np.meshgrid(c["x"], c["y"], indexing="ij")) < r[1]
    np.testing.assert_array_equal(h0, np.where(inside, 2.0, 1.0))
    alone = g.generate(cfg, np.array([1]), seed=1, device="cpu")
    np.testing.assert_array_equal(alone["fields/u"][0], out["fields/u"][1])  # independent of the chunk
    three = g.generate(g.make_config(resolution=16, n_steps=4, t_end=0.2, output="conserved"), np.array([1]), 1, "cpu")
    assert three["fields/u"].shape == (1, 5, 16, 16, 3)
    np.testing.assert_array_equal(three["fields/u"][..., :1], alone["fields/u"])


def test_failures_are_reported_with_sample_and_seed():
    g = get_generator("shallow_water")
    cfg = g.make_config(resolution=16, n_steps=2, t_end=0.2, max_substeps=1)
    with pytest.raises(DataError, match=r"shallow_water sample 0 \(seed 3\).*more than 1 steps"):
        g.generate(cfg, np.arange(2), seed=3, device="cpu")
    q0 = g.initial_state(g.make_config(resolution=16), torch.tensor([0.5, 0.5], dtype=torch.float64))
    q0[1, 0, 3, 3] = 0.0  # a dry cell: this solver needs h > 0 everywhere
    with pytest.raises(DataError, match=r"sample 8 \(seed 5\).*non-positive or non-finite"):
        solve_swe(q0, 5 / 16, 5 / 16, [0.0, 0.1], labels=(np.array([7, 8]), 5))


@pytest.mark.parametrize(
    "bad",
    [
        dict(cfl=1.5),
        dict(cfl=0.0),
        dict(radius_max=2.6),
        dict(radius_min=0.8),
        dict(resolution=16, radius_min=0.1),
        dict(gravity=0.0),
        dict(h_out=-1.0),
        dict(flux="roe"),
        dict(limiter="superbee"),
        dict(output="uv"),
        dict(n_steps=0),
    ],
)
def test_impossible_configs_are_refused(bad):
    with pytest.raises(ConfigError):
        get_generator("shallow_water").make_config(**bad)


@pytest.mark.parametrize("scale", ["tiny", "cpu", "paper"])
def test_presets_are_valid(scale):
    from neurodyn.data.assembly import data_options
    from neurodyn.experiments import load_experiment

    d = load_experiment("data/shallow_water", scale)["data"]
    cfg = get_generator(d["generator"]).make_config(**data_options(d))
    assert (cfg.n_steps, cfg.t_end, cfg.gravity, cfg.half_width) == (100, 1.0, 1.0, 2.5)
    if scale == "paper":
        assert cfg.resolution == 128 and d["n_train"] + d["n_test"] == 1000
