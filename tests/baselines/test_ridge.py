"""Closed-form leave-one-out ridge against refitting without each sample."""

import pytest
import torch

from neurodyn.baselines.ridge import loo_errors, loo_errors_ref, ridge_loo


@pytest.mark.parametrize("n,p,k", [(12, 5, 2), (15, 40, 1)])  # more samples than features, and fewer
def test_loo_errors_equal_refits(n, p, k):
    g = torch.Generator().manual_seed(n * p)
    x, y = torch.randn(n, p, generator=g, dtype=torch.float64), torch.randn(n, k, generator=g, dtype=torch.float64)
    alphas = torch.logspace(-3, 3, 7, dtype=torch.float64)
    torch.testing.assert_close(loo_errors(x, y, alphas), loo_errors_ref(x, y, alphas), rtol=1e-8, atol=1e-10)


def test_ridge_fit_solves_the_normal_equations():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(40, 6, generator=g, dtype=torch.float64)
    y = (
        x @ torch.randn(6, 2, generator=g, dtype=torch.float64)
        + 0.1 * torch.randn(40, 2, generator=g, dtype=torch.float64)
        + 3.0
    )
    w, b, alpha = ridge_loo(x, y, torch.logspace(-3, 3, 10, dtype=torch.float64))
    xc, yc = x - x.mean(0), y - y.mean(0)
    want = torch.linalg.solve(xc.T @ xc + alpha * torch.eye(6, dtype=x.dtype), xc.T @ yc)
    torch.testing.assert_close(w, want)
    torch.testing.assert_close(b, y.mean(0) - x.mean(0) @ want)
    assert alpha < 1.0  # nearly noise-free: little shrinkage has the least leave-one-out error
