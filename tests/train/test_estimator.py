"""neurodyn.SequenceClassifier / SequenceRegressor on arrays the test writes: training through the preset's own
trainer, predictions, probabilities, exact resume from a run folder, labels kept, bad input refused; in memory, no
file written anywhere and the predictions of a run on the store converted from the same arrays."""

import tempfile

import h5py
import numpy as np
import pytest
import torch

import neurodyn
from neurodyn.cli import main
from neurodyn.errors import ConfigError, DataError


def waves(n, seed, length=32):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    phase = rng.uniform(0, 2 * np.pi, (n, 1))
    s = np.sin(2 * np.pi * 3 * np.linspace(0, 1, length) + phase)
    x = np.where(y[:, None] == 0, s, np.sign(s)) + 0.1 * rng.normal(size=(n, length))
    return x[..., None].astype(np.float32), np.array(["sine", "square"])[y], phase[:, 0]


def epoch_records(run):
    return [line for line in (run / "metrics.jsonl").read_text().splitlines() if '"train_loss"' in line]


def test_classifier_trains_predicts_and_keeps_string_labels(tmp_path):
    x, y, _ = waves(48, 0)
    xt, yt, _ = waves(40, 1)
    clf = neurodyn.SequenceClassifier("minirocket/sequence", scale="tiny", run_dir=tmp_path / "mr")
    assert clf.fit(x, y) is clf
    assert clf.classes_.tolist() == ["sine", "square"]
    assert set(clf.predict(xt).tolist()) <= {"sine", "square"}
    proba = clf.predict_proba(torch.as_tensor(xt))  # tensors in, like arrays
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
    # a finished run is only reloaded: its checkpoints and epoch records stay as they are
    last = tmp_path / "whole" / "checkpoints" / "last.pt"
    stamp, epochs = last.stat().st_mtime_ns, epoch_records(tmp_path / "whole")
    reloaded = neurodyn.SequenceClassifier("gru/sequence", run_dir=tmp_path / "whole", **opts).fit(x, y)
    assert last.stat().st_mtime_ns == stamp and epoch_records(tmp_path / "whole") == epochs
    np.testing.assert_array_equal(reloaded.predict_proba(x), whole.predict_proba(x))
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


def test_fit_without_run_dir_writes_no_file(tmp_path, monkeypatch):
    """The floor: no run_dir, no file anywhere. The temporary folder, the data folder and the working folder are one
    empty folder that stays empty, and writing a checkpoint, a store or an .npz file anywhere fails the test.

    (PyTorch's own import of ``torch._dynamo``, which the first optimizer of a process makes, creates its compiler
    cache folder ``$TMPDIR/torchinductor_$USER`` once per machine; it is imported first, so that the folder checked
    holds what neurodyn writes.)"""
    import torch._dynamo  # noqa: F401

    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    monkeypatch.setenv("NEURODYN_DATA", str(empty))
    monkeypatch.setattr(tempfile, "tempdir", str(empty))

    def refuse(*args, **kwargs):
        raise AssertionError(f"a file was written: {args[:2]}")

    for owner, name in ((torch, "save"), (h5py, "File"), (np, "savez"), (np, "save")):
        monkeypatch.setattr(owner, name, refuse)
    x, y, phase = waves(40, 5)
    mask = np.ones(x.shape[:2], dtype=bool)
    mask[::4, -6:] = False
    gru = neurodyn.SequenceClassifier("gru/sequence", scale="tiny", epochs=2, batch_size=8, which="best")
    assert gru.fit(x, y, mask=mask) is gru and gru.run_dir_ is None
    assert gru.predict_proba(x, mask=mask).shape == (40, 2)
    knn = neurodyn.SequenceClassifier("knn/sequence", scale="tiny", overrides=["data.n_test=8"]).fit(x, y)
    assert 0.0 <= knn.metrics_["accuracy"] <= 1.0 and knn.score(x, y) > 0.9
    reg = neurodyn.SequenceRegressor("minirocket/sequence", scale="tiny").fit(x, np.cos(phase))
    assert reg.predict(x).shape == (40,)
    assert list(empty.rglob("*")) == []


def converted_run(tmp_path, name, preset, arrays, *overrides):
    """The former estimator's path: the arrays as an .npz file, converted into a store, trained on by `neurodyn
    train` into a run folder."""
    np.savez(tmp_path / f"{name}.npz", **arrays)
    store = tmp_path / f"{name}.h5"
    assert main(["convert", str(tmp_path / f"{name}.npz"), "--out", str(store), "--no-progress"]) == 0
    assert (
        main(
            [
                "train",
                preset,
                "--scale",
                "tiny",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--run-name",
                name,
                "--quiet",
                f"data.path={store}",
                *overrides,
            ]
        )
        == 0
    )
    return tmp_path / "runs" / name


@pytest.mark.parametrize(
    "preset, opts",
    [
        ("gru/sequence", dict(epochs=3, batch_size=8)),
        ("knn/sequence", {}),
        ("minirocket/sequence", {}),
    ],
)
def test_in_memory_predictions_equal_a_run_on_the_converted_store(tmp_path, preset, opts):
    x, y, _ = waves(36, 6)
    mask = np.ones(x.shape[:2], dtype=bool)
    mask[1::3, -7:] = False  # unequal lengths: the mask travels with the arrays
    xt, _, _ = waves(12, 7)
    classes, codes = np.unique(y, return_inverse=True)
    arrays = {
        "x": np.where(mask[..., None], x, np.nan),
        "y": codes.astype(np.int64),
        "classes": classes,
        "mask": mask.astype(np.int8),
    }
    run = converted_run(tmp_path, "old", preset, arrays, *(f"train.{k}={v}" for k, v in opts.items()))
    clf = neurodyn.SequenceClassifier(preset, scale="tiny", **opts).fit(x, y, mask=mask)
    for which in ("last", "best"):
        want = neurodyn.load_run(run, which=which).predict(xt)
        mine = (
            clf.run_.predict(xt)
            if which == "last"
            else neurodyn.SequenceClassifier(preset, scale="tiny", which="best", **opts)
            .fit(x, y, mask=mask)
            .run_.predict(xt)
        )
        torch.testing.assert_close(mine, want, rtol=0, atol=0)
    np.testing.assert_array_equal(clf.predict(xt), classes[neurodyn.load_run(run).predict(xt).argmax(-1).numpy()])


def test_in_memory_regression_equals_a_run_on_the_converted_store(tmp_path):
    x, _, phase = waves(30, 8)
    target = np.stack([np.cos(phase), np.sin(phase)], 1)
    run = converted_run(tmp_path, "reg", "gru/sequence", {"x": x, "y": target}, "train.epochs=2")
    reg = neurodyn.SequenceRegressor("gru/sequence", scale="tiny", epochs=2).fit(x, target)
    torch.testing.assert_close(
        torch.as_tensor(reg.predict(x)), neurodyn.load_run(run).predict(x).double(), rtol=0, atol=0
    )


def test_a_run_on_arrays_is_evaluated_on_a_converted_test_file(tmp_path):
    """The run folder of an estimator holds no data file: `load_run(...).evaluate` reads a test store's labels by name
    (the run records its classes), so a test file with fewer classes, converted on its own, scores as `score`."""
    x, y, _ = waves(40, 9)
    y = np.where(np.arange(40) % 5 == 0, "noise", y)
    x[y == "noise"] = np.random.default_rng(0).normal(size=(8, 32, 1))
    clf = neurodyn.SequenceClassifier("knn/sequence", scale="tiny", run_dir=tmp_path / "run").fit(x, y)
    xt, yt, _ = waves(20, 10)  # only sine and square: indices 0, 1 in its own file
    np.savez(tmp_path / "test.npz", x=xt, y=yt)
    assert main(["convert", str(tmp_path / "test.npz"), "--out", str(tmp_path / "test.h5"), "--no-progress"]) == 0
    scores = neurodyn.load_run(tmp_path / "run").evaluate([tmp_path / "test.h5"])
    assert clf.classes_.tolist() == ["noise", "sine", "square"]
    assert scores["test"]["accuracy"] == pytest.approx(clf.score(xt, yt)) and clf.score(xt, yt) > 0.6
    with pytest.raises(
        ConfigError,
        match=r"trained by a sequence estimator \(sha256:[0-9a-f]{16}\) on arrays, so it "
        r"has no stored val split",
    ):
        neurodyn.load_run(tmp_path / "run").split("val")


def summary_cells(run, metric):
    """The cells of ``metric``'s row in a summary's (one) table."""
    line = next(ln for ln in (run / "summary.md").read_text().splitlines() if ln.startswith(f"| {metric} |"))
    return [float(c) for c in line.strip("|").split("|")[1:]]


def val_accuracy(run):
    import json

    return next(json.loads(ln)["val"]["accuracy"] for ln in epoch_records(run))


def test_the_summary_of_an_estimators_run_shows_the_baselines(tmp_path):
    """No test data (the estimators' default): the summary scores the final model, majority and 1-NN on the
    validation split, said to be no test; the baselines' cells are what those presets score on that split."""
    x, y, _ = waves(60, 5)
    runs = {name: tmp_path / name for name in ("hydra", "knn", "majority")}
    for name, run in runs.items():
        neurodyn.SequenceClassifier(f"{name}/sequence", scale="tiny", run_dir=run).fit(x, y)
    text = (runs["hydra"] / "summary.md").read_text()
    assert "The validation split (no test data: these are not test scores" in text
    assert "| metric | final model | majority (baseline) | 1-NN Euclidean (baseline) |" in text
    final, majority, knn = summary_cells(runs["hydra"], "accuracy")
    assert final == pytest.approx(val_accuracy(runs["hydra"]), abs=1e-4)
    assert majority == pytest.approx(val_accuracy(runs["majority"]), abs=1e-4)
    assert knn == pytest.approx(val_accuracy(runs["knn"]), abs=1e-4)
    # with a test split held out, the test table carries them, and no validation table is shown
    neurodyn.SequenceClassifier(
        "hydra/sequence", scale="tiny", run_dir=tmp_path / "held", overrides=["data.n_test=12"]
    ).fit(x, y)
    held = (tmp_path / "held" / "summary.md").read_text()
    assert "Test split:" in held and "majority (baseline) | 1-NN Euclidean (baseline)" in held
    assert "The validation split" not in held
