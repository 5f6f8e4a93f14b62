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
    train = torch.rand(40, 8, 1) * 5 - 1
    n = Normalizer("minmax", "channel").fit(train)
    z = n.encode(train)
    assert z.min() >= 0 and z.max() <= 1 and z.max() > 0.999 and z.min() < 1e-6
    # statistics come from the training split alone: a wider test sample leaves [0, 1]
    assert n.encode(torch.full((1, 8, 1), 10.0)).max() > 1


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
    with pytest.raises(DataError, match="reduce='channel'"):
        n.encode(torch.randn(2, 8, 8, 1))
    with pytest.raises(RuntimeError, match="before fit"):
        Normalizer().encode(torch.randn(2, 3))
