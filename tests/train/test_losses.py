"""Tests of neurodyn.train.losses against independent numpy / analytic oracles."""

import math

import numpy as np
import pytest
import torch

from neurodyn.errors import ConfigError, UnknownNameError
from neurodyn.train.losses import (
    DarcyGradientLoss,
    H1Loss,
    MSELoss,
    RelativeL1Loss,
    RelativeL2Loss,
    build_loss,
    central_diff_2d,
    gradient_loss,
    h1_loss,
    mse,
    relative_lp,
)

# ------------------------------------------------------------------------------------------ relative Lp


@pytest.mark.parametrize("shape", [(4, 17, 3), (3, 8, 6, 2), (2, 5, 4, 3, 2)])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_relative_lp_matches_numpy_per_sample(shape, p):
    pred, target = torch.randn(shape, dtype=torch.float64), torch.randn(shape, dtype=torch.float64)
    a, b = pred.numpy().reshape(shape[0], -1), target.numpy().reshape(shape[0], -1)
    want = (np.abs(a - b) ** p).sum(1) ** (1 / p) / (np.abs(b) ** p).sum(1) ** (1 / p)
    np.testing.assert_allclose(relative_lp(pred, target, p, reduction="none").numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(float(relative_lp(pred, target, p)), want.mean(), rtol=1e-12)
    np.testing.assert_allclose(float(relative_lp(pred, target, p, reduction="sum")), want.sum(), rtol=1e-12)


def test_relative_lp_is_per_sample_not_global():
    # two samples of very different magnitude: per-sample mean differs from one global ratio
    target = torch.stack([torch.ones(8, 1), 100 * torch.ones(8, 1)]).double()
    pred = target.clone()
    pred[0] += 0.5  # 50 % error on the small sample, none on the large one
    assert float(relative_lp(pred, target)) == pytest.approx(0.25, rel=1e-12)


def test_relative_l2_scale_invariance_and_zero():
    u = torch.randn(3, 16, 16, 2)
    assert torch.allclose(RelativeL2Loss(reduction="none")(2 * u, u), torch.ones(3), atol=1e-6)
    assert torch.allclose(RelativeL2Loss()(5 * u, 5 * u + 5 * 0.1 * u), torch.tensor(0.1 / 1.1), rtol=1e-5)
    assert float(RelativeL2Loss()(u, u)) == 0.0
    assert float(RelativeL1Loss()(u, u)) == 0.0
    assert torch.allclose(RelativeL1Loss(reduction="none")(-u, u), torch.full((3,), 2.0), atol=1e-6)


def test_relative_lp_gradient_is_finite_at_zero_error():
    u = torch.randn(2, 8, 1)
    pred = u.clone().requires_grad_(True)
    relative_lp(pred, u, quadrature=torch.rand(8) + 0.5).backward()
    assert torch.isfinite(pred.grad).all()


def test_quadrature_constant_spacing_cancels_but_weights_do_not():
    pred, target = torch.randn(3, 10, 7, 2).double(), torch.randn(3, 10, 7, 2).double()
    plain = relative_lp(pred, target, reduction="none")
    assert torch.allclose(relative_lp(pred, target, reduction="none", quadrature=(0.1, 0.5)), plain, rtol=1e-14)
    assert torch.allclose(
        relative_lp(pred, target, reduction="none", quadrature=torch.full((10, 7), 0.3)), plain, rtol=1e-12
    )
    w = torch.rand(10, 7).double() + 0.1
    a, b, ww = pred.numpy(), target.numpy(), w.numpy()[None, :, :, None]
    want = np.sqrt((ww * (a - b) ** 2).sum((1, 2, 3)) / (ww * b**2).sum((1, 2, 3)))
    got = relative_lp(pred, target, reduction="none", quadrature=w).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert not np.allclose(got, plain.numpy(), rtol=1e-3)
    with pytest.raises(ValueError, match="quadrature"):
        relative_lp(pred, target, quadrature=torch.ones(7, 10))


def test_mse_matches_torch():
    pred, target = torch.randn(4, 9, 3), torch.randn(4, 9, 3)
    assert torch.allclose(MSELoss()(pred, target), torch.nn.functional.mse_loss(pred, target))
    assert mse(pred, target, "none").shape == (4,)


# ------------------------------------------------------------------------------------------ gradient loss


def _grid(s):
    x = torch.linspace(0, 1, s, dtype=torch.float64)
    return torch.meshgrid(x, x, indexing="ij")  # (y, x) for (H, W)


@pytest.mark.parametrize("mode", ["reference", "interior"])
def test_gradient_loss_converges_to_analytic_value(mode):
    # u = sin(pi x) sin(pi y), pred = u + eps sin(2 pi x) sin(2 pi y) on [0, 1]^2:
    #   ||d u||^2 = pi^2/4 per direction, ||d delta||^2 = pi^2 eps^2  -> each grad term = 2 eps,
    #   ||u||^2 = 1/4, ||delta||^2 = eps^2/4 -> relL2 term = eps;  total = eps (1 + weight * 4)
    eps_, weight = 0.05, 0.3
    want = eps_ * (1 + weight * 4)
    errors = []
    for s in (17, 33, 65, 129):
        y, x = _grid(s)
        u = torch.sin(math.pi * x) * torch.sin(math.pi * y)
        pred = u + eps_ * torch.sin(2 * math.pi * x) * torch.sin(2 * math.pi * y)
        got = float(gradient_loss(pred[None, ..., None], u[None, ..., None], weight=weight, mode=mode))
        errors.append(abs(got - want) / want)
    # second-order convergence of the central differences: the error drops ~4x per refinement
    assert all(a / b > 3 for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] < 1e-3, errors


def test_gradient_loss_reference_zeroes_pred_boundary():
    # a perfect prediction of a field that does not vanish on the boundary: the reference form still
    # penalises it (pred's boundary ring is zeroed, target's is not); the interior form gives exactly 0
    y, x = _grid(16)
    u = (1 + x * y)[None, ..., None]
    assert float(gradient_loss(u, u, mode="interior")) == 0.0
    assert float(gradient_loss(u, u, mode="reference")) > 0.1


def test_gradient_loss_weight_zero_is_relative_l2():
    pred, target = torch.randn(3, 12, 10, 2), torch.randn(3, 12, 10, 2)
    for mode in ("reference", "interior"):
        assert torch.allclose(gradient_loss(pred, target, weight=0.0, mode=mode), relative_lp(pred, target))
    assert float(gradient_loss(pred, target)) > float(relative_lp(pred, target))


def test_gradient_loss_reference_form_hand_computed():
    # explicit loops over a 5x6 grid: zero the boundary ring of pred, zero-padded central differences
    rng = np.random.default_rng(1)
    P, T = rng.standard_normal((2, 5, 6, 1)), rng.standard_normal((2, 5, 6, 1))
    H, W = 5, 6
    hy, hx = 0.7, 0.2  # cancels, any value

    def at(f, i, j):
        return f[i, j] if 0 <= i < H and 0 <= j < W else 0.0

    losses = []
    for b in range(2):
        p, t = P[b, :, :, 0].copy(), T[b, :, :, 0]
        rel = np.linalg.norm(p - t) / np.linalg.norm(t)
        p[0, :] = p[-1, :] = p[:, 0] = p[:, -1] = 0.0
        terms = []
        for di, dj, h in ((0, 1, hx), (1, 0, hy)):
            gp = np.array(
                [[(at(p, i + di, j + dj) - at(p, i - di, j - dj)) / (2 * h) for j in range(W)] for i in range(H)]
            )
            gt = np.array(
                [[(at(t, i + di, j + dj) - at(t, i - di, j - dj)) / (2 * h) for j in range(W)] for i in range(H)]
            )
            terms.append(np.linalg.norm(gp - gt) / np.linalg.norm(gt))
        losses.append(rel + 0.1 * sum(terms))
    got = gradient_loss(torch.from_numpy(P), torch.from_numpy(T), h=(hy, hx), reduction="none").numpy()
    np.testing.assert_allclose(got, losses, rtol=1e-12)
    got_module = DarcyGradientLoss(reduction="sum")(torch.from_numpy(P), torch.from_numpy(T))
    np.testing.assert_allclose(float(got_module), sum(losses), rtol=1e-12)


def test_central_diff_2d_axes_and_spacing():
    y, x = _grid(9)
    f = (3 * x + 5 * y)[None, ..., None]
    dx, dy = central_diff_2d(f, zero_pad=False)
    assert torch.allclose(dx, torch.full_like(dx, 3.0)) and torch.allclose(dy, torch.full_like(dy, 5.0))


def test_gradient_loss_rejects_non_2d():
    with pytest.raises(ValueError, match="2 spatial"):
        gradient_loss(torch.randn(2, 16, 1), torch.randn(2, 16, 1))


# ------------------------------------------------------------------------------------------ H1


def test_h1_periodic_1d_analytic():
    # u = sin(2 pi x), e = a sin(2 pi k x):  ratio = a sqrt((1 + (2 pi k)^2) / (1 + (2 pi)^2)) in the
    # continuum; with wrap-around central differences the exact discrete symbol is sin(2 pi k h)/h.
    n, a, k = 256, 0.3, 3
    x = torch.arange(n, dtype=torch.float64) / n
    u = torch.sin(2 * math.pi * x)[None, :, None]
    pred = u + a * torch.sin(2 * math.pi * k * x)[None, :, None]
    got = float(h1_loss(pred, u, periodic=True))
    cont = a * math.sqrt((1 + (2 * math.pi * k) ** 2) / (1 + (2 * math.pi) ** 2))
    sym = lambda m: math.sin(2 * math.pi * m / n) * n  # noqa: E731
    discrete = a * math.sqrt((1 + sym(k) ** 2) / (1 + sym(1) ** 2))
    assert got == pytest.approx(discrete, rel=1e-10)
    assert got == pytest.approx(cont, rel=2e-3)
    assert got != pytest.approx(a, rel=0.1)  # the derivative term matters: L2 alone would give a


def test_h1_periodic_2d_analytic():
    # u = sin(2 pi x) sin(2 pi y), e = a sin(2 pi k x) sin(2 pi l y)
    n, a, k, l = 128, 0.2, 2, 5
    x = torch.arange(n, dtype=torch.float64) / n
    Y, X = torch.meshgrid(x, x, indexing="ij")
    u = (torch.sin(2 * math.pi * X) * torch.sin(2 * math.pi * Y))[None, ..., None]
    e = a * (torch.sin(2 * math.pi * k * X) * torch.sin(2 * math.pi * l * Y))[None, ..., None]
    got = float(H1Loss(periodic=True)(u + e, u))
    want = a * math.sqrt((1 + 4 * math.pi**2 * (k * k + l * l)) / (1 + 8 * math.pi**2))
    sym = lambda m: math.sin(2 * math.pi * m / n) * n  # noqa: E731  (exact discrete symbol)
    discrete = a * math.sqrt((1 + sym(k) ** 2 + sym(l) ** 2) / (1 + 2 * sym(1) ** 2))
    assert got == pytest.approx(discrete, rel=1e-10)
    assert got == pytest.approx(want, rel=1.5e-2)  # O((2 pi l / n)^2) from the central differences


def test_h1_nonperiodic_2d_converges():
    # on [0,1]^2 with endpoints: ||e||^2 = eps^2/4, ||grad e||^2 = 2 pi^2 eps^2; ||u||^2 = 1/4, ||grad u||^2 = pi^2/2
    eps_ = 0.1
    want = eps_ * math.sqrt((0.25 + 2 * math.pi**2) / (0.25 + math.pi**2 / 2))
    errs = []
    for s in (33, 129):
        y, x = _grid(s)
        u = (torch.sin(math.pi * x) * torch.sin(math.pi * y))[None, ..., None]
        e = eps_ * (torch.sin(2 * math.pi * x) * torch.sin(2 * math.pi * y))[None, ..., None]
        errs.append(abs(float(h1_loss(u + e, u)) - want) / want)
    assert errs[1] < errs[0] and errs[1] < 0.02, errs


# ------------------------------------------------------------------------------------------ registry / bad input


def test_build_loss_names_and_errors():
    pred, target = torch.randn(2, 8, 8, 1), torch.randn(2, 8, 8, 1)
    assert torch.allclose(build_loss("rel_l2")(pred, target), relative_lp(pred, target))
    assert torch.allclose(build_loss("rel_l1")(pred, target), relative_lp(pred, target, p=1))
    assert torch.allclose(build_loss("mse")(pred, target), torch.nn.functional.mse_loss(pred, target))
    assert torch.allclose(build_loss("h1", periodic=True)(pred, target), h1_loss(pred, target, periodic=True))
    assert torch.allclose(build_loss("rel_l2+grad", weight=0.5)(pred, target), gradient_loss(pred, target, 0.5))
    with pytest.raises(UnknownNameError, match="rel_l2"):
        build_loss("rel_l3")
    with pytest.raises(ConfigError, match="wieght"):
        build_loss("rel_l2+grad", wieght=0.1)


@pytest.mark.parametrize("fn", [relative_lp, mse, gradient_loss, h1_loss])
def test_shape_mismatch_names_both_shapes(fn):
    with pytest.raises(ValueError, match=r"\(2, 8, 8, 1\).*\(2, 8, 8, 2\)"):
        fn(torch.randn(2, 8, 8, 1), torch.randn(2, 8, 8, 2))


@pytest.mark.parametrize("name", ["rel_l2", "rel_l1", "mse", "h1", "rel_l2+grad"])
def test_losses_propagate_nan(name):
    # losses do not raise on NaN (no device sync); the trainer sees a NaN loss and stops
    pred, target = torch.randn(2, 8, 8, 1), torch.randn(2, 8, 8, 1)
    pred[1, 4, 4, 0] = float("nan")
    out = build_loss(name, reduction="none")(pred, target)
    assert torch.isfinite(out[0]) and torch.isnan(out[1])
    assert torch.isnan(build_loss(name)(pred, target))
