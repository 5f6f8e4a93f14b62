"""The fitted baselines (majority, 1-NN, MiniRocket) against independent oracles: the mode, a NumPy brute-force
nearest neighbour, the plain-Python DTW, and a synthetic problem that only the shape of a series separates."""

import numpy as np
import pytest
import torch

from neurodyn.baselines.dtw import dtw_distance_ref
from neurodyn.errors import ConfigError
from neurodyn.models import build


def sine_or_square(n: int, seed: int, length: int = 64, noise: float = 0.1):
    """Class 0: a sine of 3 periods at a random phase; class 1: the square wave of the same phase (+ noise)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.linspace(0, 1, length)
    y = torch.randint(2, (n,), generator=g)
    s = torch.sin(2 * torch.pi * 3 * t + 2 * torch.pi * torch.rand(n, 1, generator=g))
    x = torch.where(y[:, None] == 0, s, torch.sign(s)) + noise * torch.randn(n, length, generator=g)
    return x[..., None], y


def test_majority_is_the_mode_and_the_mean():
    rng = np.random.default_rng(0)
    for _ in range(5):
        y = rng.integers(0, 4, size=int(rng.integers(5, 30)))
        m = build("majority", in_channels=2, out_channels=4)
        m.fit(torch.randn(len(y), 7, 2), None, None, torch.as_tensor(y))
        pred = m(torch.randn(3, 9, 2)).argmax(-1)
        assert torch.all(pred == int(np.bincount(y, minlength=4).argmax()))  # the mode (ties: the lowest class)
    targets = torch.randn(10, 3, dtype=torch.float64).float()
    r = build("majority", in_channels=1, out_channels=3)
    r.fit(torch.randn(10, 5, 1), None, None, targets)
    torch.testing.assert_close(r(torch.randn(2, 5, 1)), targets.double().mean(0).float().expand(2, 3))


def test_knn_euclidean_equals_numpy_brute_force():
    rng = np.random.default_rng(1)
    xtr, xte = rng.normal(size=(30, 12, 3)), rng.normal(size=(15, 12, 3))
    ytr = rng.integers(0, 3, size=30)
    m = build("knn", in_channels=3, out_channels=3)
    m.fit(torch.as_tensor(xtr, dtype=torch.float32), None, None, torch.as_tensor(ytr))
    want = ytr[[int(np.argmin([((a - b) ** 2).sum() for b in xtr.astype(np.float32)])) for a in xte.astype(np.float32)]]
    assert np.array_equal(m(torch.as_tensor(xte, dtype=torch.float32)).argmax(-1).numpy(), want)
    # regression: the neighbour's targets
    targets = torch.as_tensor(rng.normal(size=(30, 2)), dtype=torch.float32)
    r = build("knn", in_channels=3, out_channels=2)
    r.fit(torch.as_tensor(xtr, dtype=torch.float32), None, None, targets)
    idx = [int(np.argmin([((a - b) ** 2).sum() for b in xtr.astype(np.float32)])) for a in xte.astype(np.float32)]
    torch.testing.assert_close(r(torch.as_tensor(xte, dtype=torch.float32)), targets[idx])


def test_knn_dtw_equals_the_python_oracle():
    rng = np.random.default_rng(2)
    xtr, xte = rng.normal(size=(8, 10, 2)), rng.normal(size=(5, 10, 2))
    ytr = rng.integers(0, 2, size=8)
    m = build("knn", in_channels=2, out_channels=2, distance="dtw", window=0.2)
    m.fit(torch.as_tensor(xtr), None, None, torch.as_tensor(ytr))
    m.double()
    want = ytr[[int(np.argmin([dtw_distance_ref(a, b, 2) for b in xtr.astype(np.float32)])) for a in xte]]
    assert np.array_equal(m(torch.as_tensor(xte)).argmax(-1).numpy(), want)


def test_padding_and_unequal_lengths():
    """The steps after a series' end (mask 0) do not matter, wherever the padding is; a shorter series is resampled
    to the training length."""
    x, y = sine_or_square(20, 3, length=16)
    m = build("knn", in_channels=1, out_channels=2)
    m.fit(x, None, None, y)
    padded = torch.cat([x[:5], 100 * torch.randn(5, 6, 1)], 1)
    mask = torch.arange(22)[None].expand(5, 22) < 16
    torch.testing.assert_close(m(padded, mask=mask), m(x[:5]))
    assert m(x[:5, ::2]).shape == (5, 2)  # 8 steps, read as 16


@pytest.mark.parametrize("C", [1, 2])
def test_minirocket_separates_sine_from_square(C):
    xtr, ytr = sine_or_square(60, 10)
    xte, yte = sine_or_square(200, 11)
    if C == 2:  # a second channel of pure noise
        xtr, xte = (
            torch.cat([a, torch.randn(a.shape, generator=torch.Generator().manual_seed(5))], -1) for a in (xtr, xte)
        )
    m = build("minirocket", in_channels=C, out_channels=2, n_features=2000)
    m.fit(xtr, None, None, ytr)
    acc = (m(xte).argmax(-1) == yte).float().mean().item()
    maj = build("majority", in_channels=C, out_channels=2)
    maj.fit(xtr, None, None, ytr)
    chance = (maj(xte).argmax(-1) == yte).float().mean().item()
    assert acc >= 0.95 and chance <= 0.6, (acc, chance)


def test_minirocket_is_deterministic_by_seed_and_restores_from_its_state():
    x, y = sine_or_square(30, 12)
    outs = []
    for seed in (0, 0, 1):
        m = build("minirocket", in_channels=1, out_channels=2, n_features=500, seed=seed)
        m.fit(x, None, None, y)
        outs.append(m(x))
    assert torch.equal(outs[0], outs[1]) and not torch.equal(outs[0], outs[2])
    fresh = build("minirocket", in_channels=1, out_channels=2, n_features=500)
    fresh.load_state_dict(m.state_dict())  # the fitted buffers' shapes come from the state
    assert torch.equal(fresh(x), outs[2])


def test_minirocket_regression():
    """The phase of a sine from the series (as cos and sin, no wrap-around): R^2 close to 1."""
    g = torch.Generator().manual_seed(4)
    phase = 2 * torch.pi * torch.rand(80, generator=g)
    x = torch.sin(2 * torch.pi * 2 * torch.linspace(0, 1, 50) + phase[:, None])[..., None]
    target = torch.stack([phase.cos(), phase.sin()], 1)
    m = build("minirocket", in_channels=1, out_channels=2, n_features=2000)
    m.fit(x[:60], None, None, target[:60])
    pred, true = m(x[60:]), target[60:]
    r2 = 1 - (pred - true).square().sum(0) / (true - true.mean(0)).square().sum(0)
    assert r2.min() > 0.9, r2


def test_unfitted_predicts_zeros_and_bad_configs_are_refused():
    m = build("minirocket", in_channels=2, out_channels=3)
    assert torch.equal(m(torch.randn(4, 20, 2)), torch.zeros(4, 3))
    with pytest.raises(ConfigError, match="per-step targets"):
        build("knn", in_channels=1, out_channels=2, per_step=True)
    with pytest.raises(ConfigError, match="distance"):
        build("knn", in_channels=1, out_channels=2, distance="cosine")
    with pytest.raises(ConfigError, match="n_features"):
        build("minirocket", in_channels=1, out_channels=2, n_features=10)


@pytest.mark.parametrize("name,extra", [("knn", {"distance": "dtw"}), ("minirocket", {"n_features": 500})])
def test_fit_on_the_device_matches_the_cpu(device, name, extra):
    """Fitted on ``pytest --device``: the same draws and predictions as on the CPU (float64, so that the PPV
    thresholds compare the same numbers)."""
    x, y = sine_or_square(20, 13, length=24)
    x = x.double()
    outs = []
    for dev in (torch.device("cpu"), device):
        m = build(name, in_channels=1, out_channels=2, **extra).double().to(dev)
        m.fit(x.to(dev), None, None, y.to(dev))
        outs.append(m(x.to(dev)).cpu())
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-6, atol=1e-6)


def test_the_registry_finds_the_baselines_by_name_alone():
    """A fresh interpreter that imports only neurodyn.models builds them (MODEL_PACKAGES), and nothing of the
    training layer comes with them."""
    import subprocess
    import sys

    code = (
        "import sys; from neurodyn.models import build, available; m = build('minirocket', in_channels=2); "
        "assert {'majority', 'knn', 'minirocket'} <= set(available()); "
        "assert type(m).__module__ == 'neurodyn.baselines.minirocket', type(m).__module__; "
        "assert not [k for k in sys.modules if k.startswith('neurodyn.train')], 'train imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
