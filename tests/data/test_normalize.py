import pytest
import torch

from neurodyn.data.normalize import Normalizer
from neurodyn.errors import ConfigError, DataError


@pytest.mark.parametrize("reduce", ["pointwise", "channel"])
def test_gaussian_fit_gives_zero_mean_unit_std_on_train_and_inverts(reduce):
    train = torch.randn(50, 6, 5, 2) * torch.tensor([3.0, 0.1]) + torch.tensor([10.0, -2.0])
    n = Normalizer("gaussian", reduce).fit(train)
    z = n.encode(train)
    dims = (0,) if reduce == "pointwise" else (0, 1, 2)
    assert z.mean(dims).abs().max() < 1e-5
    assert (z.std(dims, unbiased=False) - 1).abs().max() < 1e-3
    test = torch.randn(7, 6, 5, 2)
    torch.testing.assert_close(n.decode(n.encode(test)), test, rtol=1e-5, atol=1e-5)


def test_minmax_maps_the_training_range_to_unit_interval_only():
    """encode(x) = (x - min) / (max - min + eps) per channel (eps = 1e-5), min / max over the training samples and
    points: the training extremes go to 0 and 1 (to eps / range), decode inverts it, and a test value outside the
    training range leaves [0, 1] by the same affine map."""
    train = torch.rand(40, 8, 2, dtype=torch.float64) * torch.tensor([5.0, 0.5], dtype=torch.float64) - 1
    n = Normalizer("minmax", "channel").fit(train)
    z = n.encode(train)
    lo, hi = train.amin((0, 1)), train.amax((0, 1))
    torch.testing.assert_close(z, (train - lo) / (hi - lo + 1e-5), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(z.amin((0, 1)), torch.zeros(2, dtype=z.dtype), rtol=0, atol=1e-12)
    torch.testing.assert_close(z.amax((0, 1)), torch.ones(2, dtype=z.dtype), rtol=0, atol=1e-4)
    torch.testing.assert_close(n.decode(z), train, rtol=1e-12, atol=1e-12)
    # statistics come from the training split alone: a wider test sample leaves [0, 1]
    wide = torch.full((1, 8, 2), 10.0, dtype=torch.float64)
    torch.testing.assert_close(n.encode(wide), (wide - lo) / (hi - lo + 1e-5), rtol=1e-12, atol=1e-12)
    assert n.encode(wide).min() > 1


def test_state_dict_round_trip_rebuilds_the_fitted_map():
    train = torch.randn(20, 4, 4, 1) * 2 + 1
    a = Normalizer("gaussian").fit(train)
    b = Normalizer("gaussian")
    b.load_state_dict(a.state_dict())
    x = torch.randn(3, 4, 4, 1)
    torch.testing.assert_close(a.encode(x), b.encode(x))


def test_errors():
    with pytest.raises(ConfigError):
        Normalizer("zscore")
    n = Normalizer("gaussian", "pointwise").fit(torch.randn(5, 4, 4, 1))
    with pytest.raises(DataError, match="same channels"):
        n.encode(torch.randn(2, 8, 8, 2))
    with pytest.raises(DataError, match="reduce='channel'"):
        Normalizer("gaussian", "channel").fit(torch.randn(5, 4, 1)).encode(torch.randn(2, 4, 3))
    with pytest.raises(RuntimeError, match="before fit"):
        Normalizer().encode(torch.randn(2, 3))


def test_pointwise_statistics_resample_onto_a_finer_grid_of_the_same_domain():
    """Oracle: data whose per-point mean is a linear function of (x, y) on a vertex grid; its mean field
    resampled to the 2x finer vertex grid is that same linear function there (bilinear is exact on it)."""

    def field(s, n):
        x = torch.linspace(0, 1, s, dtype=torch.float64)
        mean = (2 * x[:, None] - 3 * x[None, :])[None, ..., None]  # (1, s, s, 1)
        return mean + 0.5 * torch.randn(n, s, s, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

    n = Normalizer("gaussian", "pointwise").fit(field(9, 400))
    fine = field(17, 1)
    shift, scale = n._stats(fine)
    exact = 2 * torch.linspace(0, 1, 17)[:, None] - 3 * torch.linspace(0, 1, 17)[None, :]
    coarse_mean = n.shift[..., 0]
    # the resampled mean equals the bilinear interpolant of the fitted one; at the shared (even) nodes it is
    # the fitted value itself, and at the midpoints the average of its neighbours
    torch.testing.assert_close(shift[::2, ::2, 0], coarse_mean)
    torch.testing.assert_close(shift[1::2, ::2, 0], 0.5 * (coarse_mean[:-1] + coarse_mean[1:]))
    assert (shift[..., 0].double() - exact.double()).abs().max() < 0.2  # sampling noise of 400 draws
    assert scale.shape == (17, 17, 1) and (scale > 0).all()
    torch.testing.assert_close(n.decode(n.encode(fine)), fine)
