"""neurodyn.SequenceClassifier / SequenceRegressor on arrays the test writes: training through the preset's own
trainer, predictions, probabilities, exact resume from a run folder, labels kept, bad input refused."""
import numpy as np
import pytest
import torch

import neurodyn
from neurodyn.errors import ConfigError, DataError


def waves(n, seed, length=32):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    phase = rng.uniform(0, 2 * np.pi, (n, 1))
    s = np.sin(2 * np.pi * 3 * np.linspace(0, 1, length) + phase)
    x = np.where(y[:, None] == 0, s, np.sign(s)) + 0.1 * rng.normal(size=(n, length))
    return x[..., None].astype(np.float32), np.array(["sine", "square"])[y], phase[:, 0]


def test_classifier_trains_predicts_and_keeps_string_labels(tmp_path):
    x, y, _ = waves(48, 0)
    xt, yt, _ = waves(40, 1)
    clf = neurodyn.SequenceClassifier("minirocket/sequence", scale="tiny", run_dir=tmp_path / "mr")
    assert clf.fit(x, y) is clf
    assert clf.classes_.tolist() == ["sine", "square"]
    assert set(clf.predict(xt).tolist()) <= {"sine", "square"}
    proba = clf.predict_proba(torch.as_tensor(xt))                      # tensors in, like arrays
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-12)
    assert np.array_equal(clf.classes_[proba.argmax(1)], clf.predict(xt))
    assert clf.score(xt, yt) == np.mean(clf.predict(xt) == yt) >= 0.9
    # integer labels that are not 0..K-1 come back as themselves; a (N, L) array is one channel
    ints = np.where(y == "sine", 7, -3)
    knn = neurodyn.SequenceClassifier("knn/sequence", scale="tiny").fit(x[..., 0], ints)
    assert knn.classes_.tolist() == [-3, 7] and set(knn.predict(xt[..., 0]).tolist()) <= {-3, 7}
    # masks: padding after each series' end changes nothing
    padded = np.concatenate([xt, np.full((40, 5, 1), 50.0, np.float32)], 1)
    mask = np.arange(37)[None] < 32
    assert np.array_equal(knn.predict(padded, mask=np.broadcast_to(mask, (40, 37))), knn.predict(xt))


def test_gru_run_resumes_to_the_uninterrupted_result(tmp_path):
    x, y, _ = waves(40, 2)
    opts = dict(scale="tiny", epochs=2, batch_size=8, progress=False)
    whole = neurodyn.SequenceClassifier("gru/sequence", run_dir=tmp_path / "whole", **opts).fit(x, y)
    cut = neurodyn.SequenceClassifier("gru/sequence", run_dir=tmp_path / "cut", **opts)
    with pytest.raises(KeyboardInterrupt):
        cut.fit(x, y, interrupt_at=lambda epoch, batch: epoch == 1 and batch == 2)
    assert (tmp_path / "cut" / "checkpoints" / "last.pt").exists()
    again = neurodyn.SequenceClassifier("gru/sequence", run_dir=tmp_path / "cut", **opts).fit(x, y)
    np.testing.assert_allclose(again.predict_proba(x), whole.predict_proba(x), rtol=0, atol=1e-6)
    assert (tmp_path / "cut" / "summary.md").exists()
    # the same folder with other data is refused (its data.path differs), never trained over
    with pytest.raises(ConfigError):
        neurodyn.SequenceClassifier("gru/sequence", run_dir=tmp_path / "cut", **opts).fit(x[:30], y[:30])


def test_regressor_scores_r2():
    x, _, phase = waves(60, 3)
    target = np.stack([np.cos(phase), np.sin(phase)], 1)
    reg = neurodyn.SequenceRegressor("minirocket/sequence", scale="tiny", overrides=["data.n_val=0"])
    reg.fit(x[:45], target[:45])
    pred = reg.predict(x[45:])
    assert pred.shape == (15, 2)
    sst = ((target[45:] - target[45:].mean(0)) ** 2).sum(0)
    want = np.mean(1 - ((target[45:] - pred) ** 2).sum(0) / sst)
    assert reg.score(x[45:], target[45:]) == pytest.approx(want) and want > 0.8
    one = neurodyn.SequenceRegressor("majority/sequence", scale="tiny").fit(x, phase)
    assert one.predict(x).shape == (60,) and one.score(x, phase) <= 0.0 + 1e-6  # the mean: R^2 <= 0 on its data


def test_bad_input_is_refused(tmp_path):
    x, y, _ = waves(20, 4)
    clf = neurodyn.SequenceClassifier("knn/sequence", scale="tiny")
    with pytest.raises(DataError, match=r"X has shape \(20, 32, 1, 1\).*expected numbers of shape \(N, T, C\)"):
        clf.fit(x[..., None], y)
    with pytest.raises(DataError, match=r"y has shape \(19,\); expected one label per sequence"):
        clf.fit(x, y[:19])
    with pytest.raises(ConfigError, match="not fitted yet"):
        clf.predict(x)
    with pytest.raises(DataError, match=r"mask has shape"):
        clf.fit(x, y, mask=np.ones((20, 31)))
    clf.fit(x, y)
    with pytest.raises(DataError, match="X has 2 channels .* fitted on 1"):
        clf.predict(np.concatenate([x, x], -1))
    with pytest.raises(ConfigError, match="sequence preset"):
        neurodyn.SequenceClassifier("fno/darcy", scale="tiny").fit(x, y)
    with pytest.raises(ConfigError, match="unknown training option|train section has unknown"):
        neurodyn.SequenceClassifier("gru/sequence", scale="tiny", epoch=3).fit(x, y)
    with pytest.raises(DataError, match="expected numbers"):
        neurodyn.SequenceRegressor("knn/sequence", scale="tiny").fit(x, y)
