"""Bad arrays and settings given to the scikit-learn-style estimators and to ``load_run(...).predict``: each case ->
one NeurodynError of one line holding the expected words, and nothing written or trained.

The estimators check arrays as the converter checks a ``.npz`` file (:mod:`neurodyn.data.sequence_arrays`), in
``fit``, ``predict``, ``predict_proba`` and ``score``; every setting is checked before training starts. A case that
trains would show as a run folder (``run_dir``) or a temporary one (``tempfile.tempdir`` points at an empty folder).
"""

import tempfile

import numpy as np
import pytest

import neurodyn
from neurodyn.errors import NeurodynError


def _series(n=24, length=16, seed=0):
    rng = np.random.default_rng(seed)
    y = np.array(["a", "b"])[rng.integers(0, 2, n)]
    x = rng.normal(size=(n, length, 1)) + (y == "b")[:, None, None]
    return x.astype(np.float32), y


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A 1-NN classifier (string labels), a 1-NN regressor (2 targets) and the run folder of the classifier."""
    x, y = _series()
    folder = tmp_path_factory.mktemp("fitted") / "clf"
    clf = neurodyn.SequenceClassifier("knn/sequence", scale="tiny", run_dir=folder).fit(x, y)
    reg = neurodyn.SequenceRegressor("knn/sequence", scale="tiny").fit(x, np.stack([x.mean((1, 2)), x.std((1, 2))], 1))
    return clf, reg, folder


X, Y = _series()
NAN_SEQUENCE = X.copy()
NAN_SEQUENCE[3] = np.nan
BACKWARDS = np.tile(np.arange(16.0), (24, 1))
BACKWARDS[5, 7] = -1.0


def _knn(**kw):
    return neurodyn.SequenceClassifier("knn/sequence", scale="tiny", **kw)


FIT = [
    # (case, call, words); each call fits a new estimator and must refuse before writing or training anything
    ("fit-complex-x", lambda tmp: _knn().fit(X.astype(np.complex64) + 1j, Y), "X holds complex numbers"),
    ("fit-ragged-x", lambda tmp: _knn().fit([[1.0, 2.0, 3.0], [1.0, 2.0]] * 12, Y), "X is ragged"),
    ("fit-nan-labels", lambda tmp: _knn().fit(X, np.where(Y == "a", 0.0, np.nan)), "has the label nan"),
    (
        "fit-mixed-label-types",
        lambda tmp: _knn().fit(X, np.array(["a", 1] * 12, dtype=object)),
        "y mixes label types (int, str)",
    ),
    ("fit-all-nan-sequence", lambda tmp: _knn().fit(NAN_SEQUENCE, Y), "sequence 3 holds no observed value"),
    ("fit-times-decrease", lambda tmp: _knn().fit(X, Y, t=BACKWARDS), "sequence 5 has timestamps that decrease"),
    ("fit-mask-values", lambda tmp: _knn().fit(X, Y, mask=np.full((24, 16), 2)), "holds values other than 0 and 1"),
    (
        "fit-regression-no-target",
        lambda tmp: neurodyn.SequenceRegressor("knn/sequence", scale="tiny").fit(X, np.zeros((24, 0))),
        "y has shape (24, 0); expected numbers of shape (N,) or (N, k) with N = 24 and k >= 1",
    ),
    (
        "fit-regression-complex-target",
        lambda tmp: neurodyn.SequenceRegressor("knn/sequence", scale="tiny").fit(X, np.ones(24) * 1j),
        "y holds complex numbers",
    ),
    ("fit-device-cuda-without-gpu", lambda tmp: _knn(device="cuda").fit(X, Y), "no usable CUDA GPU"),
    ("fit-run-dir-is-a-file", lambda tmp: _knn(run_dir=tmp / "notes.txt").fit(X, Y), "it is a file, not a folder"),
    ("fit-run-dir-holds-nul", lambda tmp: _knn(run_dir=str(tmp / "a\0b")).fit(X, Y), "is not a folder path"),
    ("fit-run-dir-users-folder", lambda tmp: _knn(run_dir=tmp / "mine").fit(X, Y), "no run marker (.neurodyn-run)"),
    ("fit-which-unknown", lambda tmp: _knn(which="final", run_dir=tmp / "new").fit(X, Y), "which must be one of"),
    (
        "fit-which-best-without-validation",
        lambda tmp: _knn(which="best", run_dir=tmp / "new", overrides=["data.n_val=0"]).fit(X, Y),
        "which='best' predicts with the best validation epoch, and data.n_val leaves no validation split",
    ),
    (
        "fit-log-without-run-dir",
        lambda tmp: _knn(logging={"to": "csv"}).fit(X, Y),
        "train.logging.to='csv' writes logs into a run folder; give run_dir=...",
    ),
    (
        "fit-data-path-override",
        lambda tmp: _knn(overrides=[f"data.path={tmp / 'a.h5'}"]).fit(X, Y),
        "the estimators train on the arrays given to fit",
    ),
    (
        "fit-data-test-path-override",
        lambda tmp: _knn(overrides=[f"data.test_path={tmp / 'a.h5'}"]).fit(X, Y),
        "data.test_path=",
    ),
    (
        "fit-data-key-typo",
        lambda tmp: _knn(run_dir=tmp / "new", overrides=["data.n_trian=5"]).fit(X, Y),
        "data.n_trian is not a data key of a run on arrays (did you mean 'n_train'?)",
    ),
    (
        "fit-data-value",
        lambda tmp: _knn(run_dir=tmp / "new", overrides=["data.missing=zero"]).fit(X, Y),
        "data.missing must be one of",
    ),
    (
        "fit-too-few-to-train",
        lambda tmp: _knn(run_dir=tmp / "new", overrides=["data.n_test=24"]).fit(X, Y),
        "data.n_train=all leaves no training sample in the 24 samples after data.n_test=24",
    ),
]


@pytest.mark.parametrize("call, words", [c[1:] for c in FIT], ids=[c[0] for c in FIT])
def test_fit_refuses_before_anything_is_written(call, words, tmp_path, monkeypatch):
    if "cuda" in words.lower() or "GPU" in words:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("mine")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    with pytest.raises(NeurodynError) as info:
        call(tmp_path)
    text = str(info.value)
    assert words in text and "\n" not in text, text
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == before  # nothing written


def _score_one_label(clf, reg):
    return clf.score(X, Y[:1])


PREDICT = [
    # (case, call on (classifier, regressor), words): a fitted estimator refuses what fit refuses
    (
        "score-one-label-for-all",
        _score_one_label,
        "y has shape (1,); expected one label per sequence, shape (N,) = (24,)",
    ),
    (
        "score-int-labels-on-string-classifier",
        lambda clf, reg: clf.score(X, np.where(Y == "a", 0, 1)),
        "y holds number labels and the classifier was fitted on text labels",
    ),
    ("score-nan-target", lambda clf, reg: reg.score(X, np.full((24, 2), np.nan)), "has a NaN or Inf target"),
    ("score-target-width", lambda clf, reg: reg.score(X, np.zeros(24)), "fitted on targets of shape (N, 2)"),
    ("predict-all-nan-sequence", lambda clf, reg: clf.predict(NAN_SEQUENCE), "sequence 3 holds no observed value"),
    ("predict-times-decrease", lambda clf, reg: clf.predict(X, t=BACKWARDS), "sequence 5 has timestamps that decrease"),
    ("predict-proba-complex-x", lambda clf, reg: clf.predict_proba(X + 1j), "X holds complex numbers"),
    ("predict-ragged-x", lambda clf, reg: reg.predict([[1.0], [1.0, 2.0]]), "X is ragged"),
    ("predict-inf", lambda clf, reg: clf.predict(np.full((2, 16, 1), np.inf)), "X holds Inf in sequence 0"),
]


@pytest.mark.parametrize("call, words", [c[1:] for c in PREDICT], ids=[c[0] for c in PREDICT])
def test_a_fitted_estimator_refuses_bad_arrays(fitted, call, words):
    clf, reg, _ = fitted
    with pytest.raises(NeurodynError) as info:
        call(clf, reg)
    text = str(info.value)
    assert words in text and "\n" not in text, text


RUN = [
    ("load-run-all-nan-sequence", dict(x=NAN_SEQUENCE), "sequence 3 holds no observed value"),
    ("load-run-times-decrease", dict(x=X, t=BACKWARDS), "sequence 5 has timestamps that decrease"),
    ("load-run-complex-x", dict(x=X + 1j), "x holds complex numbers"),
]


@pytest.mark.parametrize("arrays, words", [c[1:] for c in RUN], ids=[c[0] for c in RUN])
def test_load_run_predict_refuses_what_fit_refuses(fitted, arrays, words):
    run = neurodyn.load_run(fitted[2])
    with pytest.raises(NeurodynError) as info:
        run.predict(**arrays)
    text = str(info.value)
    assert words in text and "\n" not in text, text


def test_the_estimator_accepts_what_the_checks_allow(fitted):
    """The checks refuse only what is wrong: unseen labels of the fitted kind count as errors in the accuracy, a
    missing value (NaN) inside a sequence is filled, times that repeat are in order."""
    clf, _, _ = fitted
    y = Y.copy()
    y[:4] = "c"  # a class the classifier never saw: wrong by definition
    assert clf.score(X, y) == pytest.approx(np.mean(clf.predict(X) == y))
    holes = X.copy()
    holes[0, 3] = np.nan
    assert clf.predict(holes).shape == (24,)
    assert clf.predict(X, t=np.repeat(np.arange(8.0), 2)).shape == (24,)
