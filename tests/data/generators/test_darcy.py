import numpy as np
import pytest
import torch

from neurodyn.data.generators import get_generator
from neurodyn.data.generators.darcy import solve_darcy
from neurodyn.data.generators.grf import neumann_grf_2d
from neurodyn.errors import ConfigError


def _manufactured(s):
    """u = sin(pi x) sin(pi y) x e^y, a = 1 + x^2 + y/2 + sin(x y); f = -div(a grad u) analytically."""
    x = np.linspace(0, 1, s)
    X, Y = np.meshgrid(x, x, indexing="ij")
    pi = np.pi
    u = np.sin(pi * X) * np.sin(pi * Y) * X * np.exp(Y)
    ux = (np.sin(pi * X) + pi * X * np.cos(pi * X)) * np.sin(pi * Y) * np.exp(Y)
    uy = np.sin(pi * X) * X * np.exp(Y) * (pi * np.cos(pi * Y) + np.sin(pi * Y))
    uxx = (2 * pi * np.cos(pi * X) - pi**2 * X * np.sin(pi * X)) * np.sin(pi * Y) * np.exp(Y)
    uyy = np.sin(pi * X) * X * np.exp(Y) * (2 * pi * np.cos(pi * Y) + np.sin(pi * Y) - pi**2 * np.sin(pi * Y))
    a = 1 + X**2 + Y / 2 + np.sin(X * Y)
    ax = 2 * X + Y * np.cos(X * Y)
    ay = 0.5 + X * np.cos(X * Y)
    f = -(ax * ux + a * uxx + ay * uy + a * uyy)
    return a, f, u


@pytest.mark.parametrize("face_mean", ["arithmetic", "harmonic"])
def test_second_order_convergence_against_manufactured_solution(face_mean):
    errors = []
    for s in (17, 33, 65, 129):
        a, f, u = _manufactured(s)
        errors.append(np.abs(solve_darcy(a, f, face_mean) - u).max())
    rates = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert errors[-1] < 1e-3
    assert np.all(rates > 1.9) and np.all(rates < 2.2), rates


def test_grf_has_the_prescribed_spectrum():
    # Project samples back on the cosine basis: the variance of mode k must be tau^(2a-2)(pi^2|k|^2+tau^2)^-a.
    alpha, tau, k_modes, s = 2.0, 3.0, 6, 64
    xi = torch.randn(4000, k_modes, k_modes, dtype=torch.float64)
    x = (torch.arange(s, dtype=torch.float64) + 0.5) / s  # midpoint rule is exact for these cosines
    f = neumann_grf_2d(xi, x, x, alpha, tau)
    k = torch.arange(k_modes, dtype=torch.float64)
    basis = torch.where(k == 0, 1.0, 2**0.5)[:, None] * torch.cos(torch.pi * k[:, None] * x[None])
    coeff = torch.einsum("bhw,kh,lw->bkl", f, basis, basis) / s**2
    var = coeff.var(dim=0)
    lam = torch.pi**2 * (k[:, None] ** 2 + k[None] ** 2)
    want = tau ** (2 * alpha - 2) * (lam + tau**2) ** (-alpha)
    want[0, 0] = 0
    assert var[0, 0] < 1e-20
    rel = (var - want).abs()[1:, 1:] / want[1:, 1:]
    assert rel.max() < 0.1  # 4000 samples: std of a variance estimate is ~2.2 %


def test_generator_threshold_subsampling_and_determinism():
    g = get_generator("darcy")
    cfg = g.make_config(resolution=9, solve_resolution=33)
    out = g.generate(cfg, np.arange(3), seed=5, device="cpu")
    assert out["fields/a"].shape == (3, 9, 9, 1) and out["fields/u"].shape == (3, 9, 9, 1)
    assert set(np.unique(out["fields/a"])) <= {3.0, 12.0}
    # the stored u is the fine solution at every 4th node
    fine = g.coefficient(cfg, np.arange(3), 5, "cpu").numpy()
    u_fine = solve_darcy(fine[1])
    np.testing.assert_allclose(out["fields/u"][1, ..., 0], u_fine[::4, ::4], rtol=1e-6, atol=1e-9)
    # sample 1 is the same whether generated alone or inside a chunk
    alone = g.generate(cfg, np.array([1]), seed=5, device="cpu")
    np.testing.assert_array_equal(alone["fields/a"][0], out["fields/a"][1])
    other_seed = g.generate(cfg, np.array([1]), seed=6, device="cpu")
    assert not np.array_equal(other_seed["fields/a"][0], out["fields/a"][1])


@pytest.mark.parametrize(
    "bad",
    [
        dict(resolution=2),
        dict(resolution=85, solve_resolution=420),
        dict(tau=-1.0),
        dict(coefficient="gamma"),
        dict(widht=3),
    ],
)
def test_impossible_configs_are_refused(bad):
    with pytest.raises(ConfigError):
        get_generator("darcy").make_config(**bad)
