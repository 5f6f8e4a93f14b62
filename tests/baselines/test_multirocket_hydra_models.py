"""The ``multirocket`` and ``hydra`` baselines: a synthetic problem only the shape of a series separates, a regression,
the same features and predictions twice for one seed (and others for another), a checkpoint restored, and their
configs checked."""

import pytest
import torch

from neurodyn.errors import ConfigError
from neurodyn.models import build
from tests.baselines.test_fitted_models import sine_or_square

SMALL = {"multirocket": {"n_features": 8 * 84 * 3}, "hydra": {"n_groups": 16}}


@pytest.mark.parametrize("name", ["multirocket", "hydra"])
@pytest.mark.parametrize("C", [1, 2])
def test_separates_sine_from_square(name, C):
    xtr, ytr = sine_or_square(60, 10)
    xte, yte = sine_or_square(200, 11)
    if C == 2:  # a second channel of pure noise
        xtr, xte = (
            torch.cat([a, torch.randn(a.shape, generator=torch.Generator().manual_seed(5))], -1) for a in (xtr, xte)
        )
    m = build(name, in_channels=C, out_channels=2, **SMALL[name])
    m.fit(xtr, None, None, ytr)
    acc = (m(xte).argmax(-1) == yte).float().mean().item()
    assert acc >= 0.95, acc


@pytest.mark.parametrize("name", ["multirocket", "hydra"])
def test_deterministic_by_seed_and_restored_from_its_state(name):
    """The same seed: the same fitted transform, features and predictions, bit for bit; another seed: others."""
    x, y = sine_or_square(30, 12)
    models, outs = [], []
    for seed in (0, 0, 1):
        m = build(name, in_channels=1, out_channels=2, seed=seed, **SMALL[name])
        m.fit(x, None, None, y)
        models.append(m)
        outs.append(m(x))
    a, b, c = models
    assert all(torch.equal(getattr(a, k), getattr(b, k)) for k in a.TRANSFORM_BUFFERS)
    assert torch.equal(a.transform(x), b.transform(x)) and not torch.equal(a.transform(x), c.transform(x))
    assert torch.equal(outs[0], outs[1]) and not torch.equal(outs[0], outs[2])
    fresh = build(name, in_channels=1, out_channels=2, **SMALL[name])
    fresh.load_state_dict(c.state_dict())  # the fitted buffers' shapes come from the state
    assert torch.equal(fresh(x), outs[2])


@pytest.mark.parametrize("name", ["multirocket", "hydra"])
def test_regression(name):
    """The phase of a sine from the series (as cos and sin, no wrap-around): R^2 close to 1."""
    g = torch.Generator().manual_seed(4)
    phase = 2 * torch.pi * torch.rand(80, generator=g)
    x = torch.sin(2 * torch.pi * 2 * torch.linspace(0, 1, 50) + phase[:, None])[..., None]
    target = torch.stack([phase.cos(), phase.sin()], 1)
    m = build(name, in_channels=1, out_channels=2, **SMALL[name])
    m.fit(x[:60], None, None, target[:60])
    pred, true = m(x[60:]), target[60:]
    r2 = 1 - (pred - true).square().sum(0) / (true - true.mean(0)).square().sum(0)
    assert r2.min() > 0.9, r2


def test_short_series_and_bad_configs():
    x, y = sine_or_square(10, 1, length=6)
    for name, fewest in (("multirocket", 10), ("hydra", 9)):
        m = build(name, in_channels=1, out_channels=2, **SMALL[name])
        assert torch.equal(m(x), torch.zeros(10, 2))  # not fitted yet: zeros
        m.fit(x, None, None, y)  # 6 steps, resampled to the fewest it takes
        assert int(m.steps) == fewest and m(x).shape == (10, 2)
    with pytest.raises(ConfigError, match="n_features must be >= 672"):
        build("multirocket", in_channels=1, out_channels=2, n_features=100)
    with pytest.raises(ConfigError, match="n_groups must be even"):
        build("hydra", in_channels=1, out_channels=2, n_groups=5)
    with pytest.raises(ConfigError, match="alpha_min and alpha_max"):
        build("hydra", in_channels=1, out_channels=2, alpha_min=0.0)
