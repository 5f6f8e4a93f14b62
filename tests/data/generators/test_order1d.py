import math

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

from neurodyn.data.generators import get_generator
from neurodyn.data.generators.order1d import apply_order_operator, evaluate_mixture
from neurodyn.errors import ConfigError

# 8th-order central second difference
_D2 = {0: -205 / 72, 1: 8 / 5, 2: -1 / 5, 3: 8 / 315, 4: -1 / 560}


def _fd_operator(n_points, tau):
    """I - tau^2 D2 on a periodic grid of n_points on [0, 1), D2 the 8th-order stencil (sparse)."""
    h = 1.0 / n_points
    diags, offsets = [], []
    for k, c in _D2.items():
        for o in {k, -k, n_points - k, -(n_points - k)} if k else {0}:
            diags.append(np.full(n_points - abs(o), c / h**2))
            offsets.append(o)
    d2 = sp.diags(diags, offsets, shape=(n_points, n_points))
    return (sp.identity(n_points) - tau**2 * d2).tocsc()


def test_cosine_modes_are_damped_by_the_exact_transfer_function():
    s = torch.arange(256, dtype=torch.float64) / 256
    for m in (0, 1, 3, 17, 128):
        x = torch.cos(2 * math.pi * m * s)
        for n in (1, 4):
            y = apply_order_operator(x, n, 0.08)
            want = (1 + 0.08**2 * (2 * math.pi * m) ** 2) ** (-n)
            torch.testing.assert_close(y, want * x, rtol=0, atol=1e-13)
            y_idx = apply_order_operator(x, n, 0.08, wavenumber="index")
            torch.testing.assert_close(y_idx, (1 + 0.08**2 * m**2) ** (-n) * x, rtol=0, atol=1e-13)


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_targets_solve_the_equation_on_a_4x_finer_grid_by_finite_differences(order):
    # Oracle independent of the FFT: rebuild the continuous input on a 4x finer grid, solve
    # (I - tau^2 D2)^n y = x with an 8th-order finite-difference matrix (sparse LU, n times) and
    # compare at the coarse nodes with the stored target.
    g = get_generator("order1d")
    cfg = g.make_config(order=order)
    ids = np.arange(3)
    out = g.generate(cfg, ids, seed=7, device="cpu")
    p = g.params(cfg, ids, 7)
    fine = torch.arange(4 * 256, dtype=torch.float64) / (4 * 256)
    x_fine = evaluate_mixture(cfg, p, fine).numpy()
    lu = spla.splu(_fd_operator(4 * 256, 0.08))
    for b in ids:
        y = x_fine[b]
        for _ in range(order):
            y = lu.solve(y)
        ref = y[::4]
        err = np.linalg.norm(out["fields/y"][b, :, 0] - ref) / np.linalg.norm(ref)
        assert err < 1e-6, (order, b, err)  # float32 storage: ~2e-8 observed
        np.testing.assert_allclose(out["fields/x"][b, :, 0], x_fine[b, ::4], rtol=0, atol=1e-5)


def test_fourier_identity_and_composition_on_stored_data():
    g = get_generator("order1d")
    outs = {n: g.generate(g.make_config(order=n), np.arange(8), seed=42, device="cpu") for n in (1, 3)}
    np.testing.assert_array_equal(outs[1]["fields/x"], outs[3]["fields/x"])  # inputs do not depend on the order
    x = torch.tensor(outs[3]["fields/x"][..., 0], dtype=torch.float64)
    y3 = torch.tensor(outs[3]["fields/y"][..., 0], dtype=torch.float64)
    m = torch.arange(129, dtype=torch.float64)
    H1 = 1 / (1 + 0.08**2 * (2 * math.pi * m) ** 2)
    xh, yh = torch.fft.rfft(x), torch.fft.rfft(y3)
    assert ((yh - H1**3 * xh).abs().max() / xh.abs().max()) < 1e-6
    # T3 = T1 o T1 o T1
    y1 = torch.tensor(outs[1]["fields/y"][..., 0], dtype=torch.float64)
    torch.testing.assert_close(apply_order_operator(apply_order_operator(y1, 1, 0.08), 1, 0.08), y3, rtol=0, atol=1e-5)


def test_mixture_has_its_three_components():
    g = get_generator("order1d")
    smooth = g.make_config(pulses_min=0, pulses_max=0)
    x = torch.tensor(g.generate(smooth, np.arange(64), 0, "cpu")["fields/x"][..., 0], dtype=torch.float64)
    power = (torch.fft.rfft(x).abs() ** 2).mean(0)
    assert power[33:].max() < 1e-8 * power[1:5].mean() and power[0] < 1e-8 * power[1:5].mean()
    # broadband amplitude ~ 0.5 / m relative to the low modes' 1: power ratio 1 / (4 m^2)
    ratio = power[5:33] / power[1:5].mean() * 4 * torch.arange(5, 33) ** 2
    assert 0.5 < ratio.mean() < 2.0
    # pulses add a positive or negative localised bump: a nonzero mean and power above mode 32
    xp = torch.tensor(g.generate(g.make_config(), np.arange(64), 0, "cpu")["fields/x"][..., 0], dtype=torch.float64)
    assert (torch.fft.rfft(xp).abs() ** 2).mean(0)[40:].max() > 1e-6 and xp.mean(1).abs().max() > 1e-3


def test_split_seeds_reproduce_separate_files_and_chunking_does_not_matter(data_dir):
    g = get_generator("order1d")
    cfg = g.make_config(order=2, resolution=64, broadband_max_mode=16, split_sizes=[3, 2, 2], split_seeds=[42, 43, 44])
    combined = g.generate(cfg, np.arange(7), seed=0, device="cpu")
    plain = g.make_config(order=2, resolution=64, broadband_max_mode=16)
    for lo, hi, seed in ((0, 3, 42), (3, 5, 43), (5, 7, 44)):
        alone = g.generate(plain, np.arange(hi - lo), seed=seed, device="cpu")
        np.testing.assert_array_equal(combined["fields/x"][lo:hi], alone["fields/x"])
        np.testing.assert_array_equal(combined["fields/y"][lo:hi], alone["fields/y"])
    one = g.generate(cfg, np.array([4]), seed=0, device="cpu")
    np.testing.assert_array_equal(one["fields/y"][0], combined["fields/y"][4])
    with pytest.raises(ConfigError):
        g.run(cfg, 8, seed=0, progress=False)
    path = g.run(cfg, 7, seed=0, progress=False, chunk_size=3)
    import h5py

    with h5py.File(path) as f:
        np.testing.assert_array_equal(f["fields/y"][:], combined["fields/y"])


@pytest.mark.parametrize(
    "bad",
    [
        dict(order=0),
        dict(order=9),
        dict(tau=0.0),
        dict(tau=-0.1),
        dict(wavenumber="freq"),
        dict(broadband_max_mode=128),
        dict(pulse_width_min=0.0),
        dict(pulses_min=4),
        dict(split_sizes=[10, 2], split_seeds=[42]),
        dict(split_sizes=[1, 1], split_seeds=[4, 4]),
    ],
)
def test_impossible_configs_are_refused(bad):
    with pytest.raises(ConfigError):
        get_generator("order1d").make_config(**bad)


@pytest.mark.parametrize("scale", ["tiny", "cpu", "paper"])
def test_presets_are_valid(scale):
    from neurodyn.data.assembly import data_options
    from neurodyn.experiments import load_experiment

    d = load_experiment("data/order1d", scale, ["data.order=3"])["data"]
    cfg = get_generator(d["generator"]).make_config(**data_options(d))
    assert (cfg.order, cfg.tau, cfg.resolution, cfg.split_seeds) == (3, 0.08, 256, (42, 43, 44))
    assert (d["n_train"], d["n_val"], d["n_test"]) == tuple(cfg.split_sizes)
    if scale == "paper":
        assert cfg.split_sizes == (12000, 2000, 2000)
