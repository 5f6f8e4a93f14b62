import math

import numpy as np
import pytest
import scipy.sparse.linalg as spla
import torch

from neurodyn.data.generators import get_generator
from neurodyn.data.generators.darcy import darcy_matrix
from neurodyn.data.generators.poisson import fd_poisson_dirichlet, poisson_nodes, poisson_series
from neurodyn.errors import ConfigError


def _naive_source(a, r, x, y):
    """CNO's f(x, y) = pi/K^2 sum_ij a_ij (i^2+j^2)^r sin(pi i x) sin(pi j y), written out term by term."""
    k = a.shape[0]
    total = 0.0
    for i in range(1, k + 1):
        for j in range(1, k + 1):
            total += a[i - 1, j - 1] * (i * i + j * j) ** r * math.sin(math.pi * i * x) * math.sin(math.pi * j * y)
    return math.pi / k**2 * total


def test_source_matches_the_formula_and_minus_laplacian_of_u_is_f():
    rng = np.random.default_rng(1)
    a = torch.tensor(rng.uniform(-1, 1, (1, 4, 4)))
    pts = rng.uniform(0.05, 0.95, (6, 2))
    for x0, y0 in pts:
        x, y = torch.tensor([x0], dtype=torch.float64), torch.tensor([y0], dtype=torch.float64)
        f, _ = poisson_series(a, -0.5, x, y)
        assert abs(float(f) - _naive_source(a[0].numpy(), -0.5, x0, y0)) < 1e-12
        # -Laplacian of the series u by a 4th-order finite-difference stencil, independent of the series algebra
        h = 1e-3
        off = torch.tensor([-2, -1, 0, 1, 2], dtype=torch.float64) * h
        w = torch.tensor([-1, 16, -30, 16, -1], dtype=torch.float64) / (12 * h * h)
        _, ux = poisson_series(a, -0.5, x0 + off, y)
        _, uy = poisson_series(a, -0.5, x, y0 + off)
        lap = (w * ux[0, :, 0]).sum() + (w * uy[0, 0, :]).sum()
        assert abs(float(-lap - f)) < 1e-6 * max(1.0, abs(float(f)))


@pytest.mark.parametrize("include_boundary", [True, False])
def test_fd_solve_converges_at_second_order_to_the_exact_series(include_boundary):
    g = get_generator("poisson")
    errors, sizes = [], (17, 33, 65, 129)
    for s in sizes:
        ex = g.generate(g.make_config(resolution=s, K=3, include_boundary=include_boundary), np.arange(2), 3, "cpu")
        fd = g.generate(
            g.make_config(resolution=s, K=3, include_boundary=include_boundary, solver="fd"), np.arange(2), 3, "cpu"
        )
        np.testing.assert_array_equal(ex["fields/f"], fd["fields/f"])
        errors.append(np.abs(ex["fields/u"] - fd["fields/u"]).max() / np.abs(ex["fields/u"]).max())
    h = 1.0 / (np.array(sizes) - 1 if include_boundary else np.array(sizes) + 1)
    rates = np.log(np.array(errors[:-1]) / np.array(errors[1:])) / np.log(h[:-1] / h[1:])
    assert errors[-1] < 2e-4
    assert np.all(rates > 1.9) and np.all(rates < 2.1), rates


def test_dst_solver_equals_a_sparse_direct_solve_of_the_5_point_system():
    s = 21
    f = torch.randn(2, s - 2, s - 2, dtype=torch.float64)
    u = fd_poisson_dirichlet(f, 1.0 / (s - 1))
    m = darcy_matrix(np.ones((s, s))).tocsc()  # -div(1 grad .): the 5-point -Laplacian on interior nodes
    for b in range(2):
        ref = spla.spsolve(m, f[b].numpy().ravel()).reshape(s - 2, s - 2)
        np.testing.assert_allclose(u[b].numpy(), ref, rtol=0, atol=1e-12 * np.abs(ref).max())


def test_generator_fields_boundary_ood_and_determinism():
    g = get_generator("poisson")
    cfg = g.make_config(resolution=64, K=16)
    out = g.generate(cfg, np.arange(4), seed=0, device="cpu")
    assert out["fields/f"].shape == (4, 64, 64, 1) and out["fields/u"].shape == (4, 64, 64, 1)
    assert out["params/a"].shape == (4, 16, 16) and np.abs(out["params/a"]).max() <= 1
    for key in ("fields/f", "fields/u"):
        v = out[key][..., 0]
        assert not v[:, 0].any() and not v[:, -1].any() and not v[:, :, 0].any() and not v[:, :, -1].any()
    np.testing.assert_allclose(g.coords(cfg)["x"], np.linspace(0, 1, 64))
    # the stored u is the series of the stored coefficients
    x = poisson_nodes(64)
    _, u = poisson_series(torch.tensor(out["params/a"][2:3], dtype=torch.float64), -0.5, x, x)
    np.testing.assert_allclose(out["fields/u"][2, ..., 0], u[0].numpy(), rtol=0, atol=1e-7)
    alone = g.generate(cfg, np.array([2]), seed=0, device="cpu")
    np.testing.assert_array_equal(alone["fields/u"][0], out["fields/u"][2])
    ood = g.generate(g.make_config(resolution=64, K=20), np.arange(1), seed=1, device="cpu")
    assert ood["params/a"].shape == (1, 20, 20)
    assert not np.array_equal(g.generate(cfg, np.array([2]), seed=1, device="cpu")["fields/f"][0], out["fields/f"][2])


@pytest.mark.parametrize(
    "bad",
    [
        dict(K=0),
        dict(resolution=16, K=15),
        dict(resolution=16, K=17, include_boundary=False),
        dict(r=-11.0),
        dict(r=float("nan")),
        dict(solver="multigrid"),
        dict(resolution=2),
    ],
)
def test_impossible_configs_are_refused(bad):
    with pytest.raises(ConfigError):
        get_generator("poisson").make_config(**bad)


@pytest.mark.parametrize("preset, k", [("data/poisson", 16), ("data/poisson_ood", 20)])
@pytest.mark.parametrize("scale", ["tiny", "cpu", "paper"])
def test_presets_are_valid(preset, k, scale):
    from neurodyn.data.assembly import data_options
    from neurodyn.experiments import load_experiment

    d = load_experiment(preset, scale)["data"]
    cfg = get_generator(d["generator"]).make_config(**data_options(d))
    if scale == "paper":
        assert (cfg.resolution, cfg.K, cfg.r, cfg.solver) == (64, k, -0.5, "exact")
        assert (d.get("n_train", 0), d.get("n_val", 0), d["n_test"]) == ((1024, 128, 256) if k == 16 else (0, 0, 256))
