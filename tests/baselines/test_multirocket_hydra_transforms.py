"""MultiRocket's and Hydra's transforms: the vectorised features against explicit loops, the four pooling operators
and the competing counts against hand-worked cases, the paper's sizes, and the draws a function of the seed."""

import numpy as np
import pytest
import torch

from neurodyn.baselines import hydra_transform as hy
from neurodyn.baselines import multirocket_transform as mr


def test_the_four_pooling_operators_by_hand():
    # z = conv - bias: positives at 1, 2 and 4 (indices counted from the first counted position)
    z = [-1.0, 2.0, 0.5, -3.0, 1.5, 0.0]
    assert mr.pooled_ref(z) == pytest.approx([3 / 6, (2.0 + 0.5 + 1.5) / 3, (1 + 2 + 4) / 3, 2.0])
    assert mr.pooled_ref([-1.0, 0.0]) == [0.0, 0.0, -1.0, 0.0]  # nothing positive: MIPV -1
    conv = torch.tensor(z, dtype=torch.float64)[None, None]  # (n=1, K=1, m=6)
    got = mr._pooled(conv, torch.zeros(1, 1, dtype=torch.float64))[0, 0, 0]
    np.testing.assert_allclose(got.numpy(), mr.pooled_ref(z))


@pytest.mark.parametrize("C", [1, 3])
def test_multirocket_transform_equals_explicit_loops(C):
    g = torch.Generator().manual_seed(10 + C)
    x = torch.randn(3, 21, C, generator=g, dtype=torch.float64)
    params = mr.multirocket_fit(x, n_features=8 * 84 * 3, seed=2)
    assert params["dilations"].tolist() == [1, 2] and params["diff_dilations"].tolist() == [1, 2]
    feats = mr.multirocket_transform(x, params)
    assert feats.shape == (3, mr.n_output_features(params)) == (3, 2 * 4 * 84 * 3)
    np.testing.assert_allclose(feats.numpy(), mr.multirocket_transform_ref(x.numpy(), params), atol=1e-12)
    np.testing.assert_allclose(mr.multirocket_transform(x, params, chunk_elements=1).numpy(), feats.numpy())
    ppv = feats.reshape(3, 2, 4, -1)[:, :, 0]
    assert 0 <= ppv.min() and ppv.max() <= 1


def test_multirocket_sizes_are_the_papers():
    x = torch.randn(4, 150, 1, generator=torch.Generator().manual_seed(0))
    params = mr.multirocket_fit(x)  # 50,000 requested
    assert mr.n_output_features(params) == 49_728  # 2 x 4 x 84 x 74
    assert len(params["diff_biases"]) == len(params["biases"]) == 84 * 74
    with pytest.raises(ValueError, match="L >= 10"):
        mr.multirocket_fit(x[:, :9])


@pytest.mark.parametrize("C", [1, 4])
def test_hydra_transform_equals_explicit_loops(C):
    g = torch.Generator().manual_seed(20 + C)
    x = torch.randn(3, 40, C, generator=g, dtype=torch.float64)
    params = hy.hydra_fit(x, n_kernels=4, n_groups=6, seed=3)
    assert params["dilations"].tolist() == [1, 2, 4]  # floor(log2(39 / 8)) = 2
    feats = hy.hydra_transform(x, params)
    assert feats.shape == (3, hy.n_output_features(params)) == (3, 3 * 2 * 2 * 3 * 4)
    np.testing.assert_allclose(feats.numpy(), hy.hydra_transform_ref(x.numpy(), params), atol=1e-12)
    np.testing.assert_allclose(hy.hydra_transform(x, params, chunk_elements=1).numpy(), feats.numpy())
    # every time step of every group counts one minimum: the hard counts of a group sum to the steps
    hard = feats.reshape(3, 3, 2, 2, 3, 4)[:, :, :, 1].sum(-1)  # (n, D, representation, group)
    assert torch.all(hard[:, :, 0] == 40) and torch.all(hard[:, :, 1] == 39)


def test_hydra_kernels_and_channels_are_the_papers():
    x = torch.zeros(2, 150, 6)
    params = hy.hydra_fit(x)
    w = params["weights"].double()
    assert w.shape == (5, 2, 32, 8, 9)  # dilations 1..16, g/2 = 32, k = 8
    torch.testing.assert_close(w.sum(-1), torch.zeros(w.shape[:-1], dtype=torch.float64), atol=1e-6, rtol=0)
    torch.testing.assert_close(w.abs().sum(-1), torch.ones(w.shape[:-1], dtype=torch.float64))
    assert torch.all(params["channels"].sum(-1) == 3)  # clip(6 // 2, 2, 8), with replacement
    assert (params["channels"] > 1).any() and (params["channels"] == 1).any()
    assert hy.n_output_features(params) == 5 * 1024
    assert hy.hydra_dilations(9) == [1] and hy.hydra_dilations(17) == [1, 2] and hy.hydra_dilations(16) == [1]


def test_hydra_counts_by_hand():
    """Two kernels in one group: the value itself and its negative, so the sign of each step picks the winner."""
    params = {
        "dilations": torch.tensor([1]),
        "channels": torch.ones(1, 2, 1, 1),
        "weights": torch.zeros(1, 2, 1, 2, 9, dtype=torch.float64),
    }
    params["weights"][0, :, 0, 0, 4] = 1.0  # kernel 0: the value itself
    params["weights"][0, :, 0, 1, 4] = -1.0  # kernel 1: its negative
    x = torch.tensor([[1.0, 2.0, -3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]], dtype=torch.float64)[..., None]
    f = hy.hydra_transform(x, params).reshape(2, 2, 2)  # (representation, max/min, kernel)
    # the series: kernel 0 wins where x > 0 (sum 50), kernel 1 where x < 0 (adds 3); the minimum the other way
    assert f[0, 0].tolist() == [sum(v for v in x.ravel().tolist() if v > 0), 3.0]
    assert f[0, 1].tolist() == [1.0, 9.0]
    # the difference (1, -5, 7, 1, ...): positive 8 times
    assert f[1, 1].tolist() == [1.0, 8.0]


def test_the_draws_are_a_function_of_the_seed():
    x = torch.randn(5, 30, 2, generator=torch.Generator().manual_seed(0))
    for fit in (lambda s: mr.multirocket_fit(x, 8 * 84, seed=s), lambda s: hy.hydra_fit(x, 4, 4, seed=s)):
        a, b, c = fit(1), fit(1), fit(2)
        assert all(torch.equal(a[k], b[k]) for k in a)
        assert not all(torch.equal(a[k], c[k]) for k in a if a[k].is_floating_point())


def test_sparse_scaling():
    f = torch.tensor([[4.0, 0.0, -1.0], [16.0, 9.0, -2.0], [0.0, 9.0, -3.0]], dtype=torch.float64)
    mean, scale = hy.sparse_scaling(f)
    s = torch.tensor([[2.0, 0.0, 0.0], [4.0, 3.0, 0.0], [0.0, 3.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(mean, s.mean(0))
    torch.testing.assert_close(scale, s.std(0) + (s == 0).double().mean(0) ** 4 + 1e-8)
    z = hy.sparse_scaled(f, mean, scale)
    assert z[2, 0] == 0 and z[0, 1] == 0 and torch.all(z[:, 2] == 0)  # zeros stay zero
    torch.testing.assert_close(z[0, 0], (2.0 - mean[0]) / scale[0])
