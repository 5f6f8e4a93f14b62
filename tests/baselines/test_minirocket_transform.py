"""MiniRocket's transform: its kernels and dilations as the paper defines them, and the vectorised PPV features
against explicit loops."""

import math

import numpy as np
import pytest
import torch

from neurodyn.baselines.minirocket_transform import (
    fit_dilations,
    kernel_weights,
    minirocket_fit,
    minirocket_transform,
    minirocket_transform_ref,
    quantiles,
)


def test_the_84_kernels():
    w = kernel_weights()
    assert w.shape == (84, 9) and len({tuple(r.tolist()) for r in w}) == 84
    assert torch.all((w == 2).sum(1) == 3) and torch.all((w == -1).sum(1) == 6) and torch.all(w.sum(1) == 0)


def test_dilations_fit_the_series_and_count_the_features():
    for L in (9, 24, 150, 1000):
        dil, per = fit_dilations(L, 10_000, 32)
        assert sum(per) == 10_000 // 84 and dil[0] == 1 and dil == sorted(set(dil))
        assert max(dil) * 8 + 1 <= L  # the receptive field fits the series
    assert len(fit_dilations(1000, 10_000, 32)[0]) > 5  # long series: many dilations
    q = quantiles(5).numpy()
    np.testing.assert_allclose(q, [(j * (1 + math.sqrt(5)) / 2) % 1 for j in range(1, 6)])


@pytest.mark.parametrize("C", [1, 3])
def test_transform_equals_explicit_loops(C):
    g = torch.Generator().manual_seed(C)
    x = torch.randn(4, 21, C, generator=g, dtype=torch.float64)
    params = minirocket_fit(x, n_features=84 * 3, seed=2)
    assert len(params["dilations"]) == 2  # dilations 1 and 2 for 21 steps
    feats = minirocket_transform(x, params)
    np.testing.assert_allclose(feats.numpy(), minirocket_transform_ref(x.numpy(), params), atol=1e-12)
    assert feats.shape == (4, 84 * 3) and 0.0 <= feats.min() and feats.max() <= 1.0
    np.testing.assert_allclose(minirocket_transform(x, params, chunk_elements=1).numpy(), feats.numpy())


def test_fit_is_a_function_of_the_seed():
    x = torch.randn(6, 30, 2, generator=torch.Generator().manual_seed(0))
    a, b, c = minirocket_fit(x, 500, seed=1), minirocket_fit(x, 500, seed=1), minirocket_fit(x, 500, seed=2)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["biases"], c["biases"])
    with pytest.raises(ValueError, match="L >= 9"):
        minirocket_fit(x[:, :8], 500)
