"""Scikit-learn-style estimators over every sequence preset: ``neurodyn.SequenceClassifier`` / ``SequenceRegressor``.

```python
clf = neurodyn.SequenceClassifier("gru/sequence", scale="cpu", run_dir="runs/mine", epochs=20)
clf.fit(X, y)                       # X (N, L, C) or (N, L) arrays or tensors; y (N,) labels of any kind
clf.predict(X_new); clf.predict_proba(X_new); clf.score(X_test, y_test)
```

``fit(X, y, t=None, mask=None)`` runs the preset's own training, as ``neurodyn train PRESET data.path=STORE`` would:
the arrays are written as an ``.npz`` file and converted into a sequence store under ``run_dir/estimator_data/``
(named by a digest of the arrays), and :func:`neurodyn.train.experiment.run_experiment` trains into ``run_dir``
with the preset's validation split (``data.n_val``), checkpoints and summary. Given a ``run_dir`` that already holds
this training, ``fit`` resumes it exactly (the trainer's resume) and a finished one is only reloaded; other data or
settings there are refused. Without ``run_dir`` each ``fit`` trains into a new temporary folder.

Settings: ``model`` is any sequence preset (``nac/sequence``, ``gru/sequence``, ..., and the fitted baselines
``majority/sequence``, ``knn/sequence``, ``minirocket/sequence``); ``scale``; ``overrides``, dot-list overrides
(``["model.hidden=16", "data.n_val=0"]``); any ``train.*`` option as a keyword (``epochs=5``, ``lr=1e-3``).

Inputs: ``X (N, L, C)`` (``(N, L)``: one channel), NaN for a missing value; ``t (N, L)`` or ``(L,)`` timestamps;
``mask (N, L)`` 1 on a real step. The classifier keeps the labels' own values (``classes_``, sorted): strings,
integers or anything NumPy sorts; ``predict`` returns them. Probabilities are the softmax of the model's logits
(for ``knn``: about 1 - 1e-6 (K - 1) for the neighbour's class; for ``minirocket``: a softmax of ridge scores, not
calibrated). The regressor takes ``y (N,)`` or ``(N, k)`` numbers.

Every array is checked as the converter checks a file (:mod:`neurodyn.data.sequence_arrays`: shapes, dtypes, NaN /
Inf, complex numbers, masks, timestamps in time order, label kinds) in ``fit``, ``predict``, ``predict_proba`` and
``score``, each problem one DataError; every setting (the preset, its overrides and train options, ``which``,
``device``, ``run_dir``) is checked before anything is written or trained.
"""
from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..data.sequence_arrays import check_labels, check_series, check_targets, label_kind
from ..errors import ConfigError, DataError


class _SequenceEstimator:
    """What the classifier and the regressor share (module docstring)."""

    classifier = False

    def __init__(self, model: str = "nac/sequence", *, scale: str = "cpu", run_dir: str | Path | None = None,
                 overrides: list[str] | tuple[str, ...] = (), which: str = "last", device: str | torch.device = "cpu",
                 progress: bool | None = False, **train_options: Any):
        self.model, self.scale, self.run_dir, self.overrides = model, scale, run_dir, list(overrides)
        self.which, self.device, self.progress, self.train_options = which, device, progress, dict(train_options)

    # ------------------------------------------------------------------------------------------------ fit
    def _targets(self, y, n: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        raise NotImplementedError

    def _check_options(self) -> None:
        """Every setting that can be wrong, before anything is written or trained: ``which``, ``device`` (a GPU this
        machine has), ``run_dir`` (a folder a training may write into)."""
        from ..checkpoint_io import check_device
        from .predict import WHICH
        from .run_folder import check_trainable

        if self.which not in WHICH:
            raise ConfigError(f"which must be one of {', '.join(WHICH)} (the checkpoint predict uses); got "
                              f"{self.which!r}")
        check_device(self.device, "device")
        if self.run_dir is not None:
            text = str(self.run_dir)
            if not text.strip() or "\0" in text:
                raise ConfigError(f"run_dir {self.run_dir!r} is not a folder path; give a folder (or None: no run "
                                  "folder is kept)")
            check_trainable(Path(self.run_dir), f"{type(self).__name__}.fit", "another run_dir")

    def fit(self, X, y, t=None, mask=None, *, interrupt_at=None):
        """Train the preset on ``X``, ``y`` (module docstring); returns ``self``. ``interrupt_at(epoch, batch)``:
        the trainer's test hook (a Ctrl-C at that batch)."""
        from ..data.formats.convert import convert_to_store
        from ..experiments import load_experiment
        from .experiment import check_config, run_experiment
        from .predict import load_run
        from .run_folder import open_run_folder

        X, t, mask = check_series(X, t, mask)
        y_store, extra = self._targets(y, len(X))
        arrays = {"x": np.where(mask[..., None], X, np.nan), "y": y_store, **extra}
        if t is not None:
            arrays["t"] = np.ascontiguousarray(t)
        if not mask.all():
            arrays["mask"] = mask.astype(np.int8)
        options = [f"train.{k}={json.dumps(v)}" for k, v in self.train_options.items()]
        cfg = load_experiment(self.model, self.scale, [*self.overrides, *options])  # a bad name fails before any write
        if cfg.get("task") != "sequence":
            raise ConfigError(f"model {self.model!r} is a preset of the {cfg.get('task')!r} task; the sequence "
                              "estimators take a sequence preset (nac/sequence, gru/sequence, knn/sequence, ...)")
        self._check_options()
        check_config(cfg, self.device, data=False)  # the train options and model keys, before anything is written
        run_dir = Path(self.run_dir) if self.run_dir is not None else Path(tempfile.mkdtemp(prefix="neurodyn-fit-"))
        open_run_folder(run_dir)
        digest = hashlib.sha1(b"".join(np.ascontiguousarray(a).tobytes() + str(a.shape).encode()
                                       for _, a in sorted(arrays.items()))).hexdigest()[:16]
        folder = run_dir / "estimator_data"
        folder.mkdir(parents=True, exist_ok=True)
        npz = folder / f"train-{digest}.npz"
        if not npz.exists():
            tmp = folder / f".train-{digest}.npz.tmp"
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
            tmp.replace(npz)
        store = convert_to_store(npz, folder / f"train-{digest}.h5", kind="sequence-npz", owner=run_dir)
        cfg = load_experiment(self.model, self.scale, [*self.overrides, *options, f"data.path={store}"])
        self.metrics_ = run_experiment(cfg, run_dir, device=self.device, resume=True, progress=self.progress,
                                       interrupt_at=interrupt_at)
        self.run_dir_ = run_dir
        self.run_ = load_run(run_dir, which=self.which, device=self.device)
        self.n_features_in_ = X.shape[2]
        self._after_fit(store)
        return self

    def _after_fit(self, store: Path) -> None:
        pass

    # ------------------------------------------------------------------------------------------------ predict
    def _raw_check(self) -> None:
        if not hasattr(self, "run_"):
            raise ConfigError(f"this {type(self).__name__} is not fitted yet; call fit(X, y) first")

    def _raw(self, X, t=None, mask=None) -> torch.Tensor:
        self._raw_check()
        X, t, mask = check_series(X, t, mask, channels=self.n_features_in_)
        return self.run_.predict(X, t=t, mask=mask)


class SequenceClassifier(_SequenceEstimator):
    """Classifies sequences with a sequence preset (module docstring). ``classes_``: the labels, sorted."""

    classifier = True

    def _targets(self, y, n):
        y = check_labels(y, n)
        classes = np.unique(y)
        names = np.asarray([str(c) for c in classes])
        if len(set(names.tolist())) != len(names):
            raise ConfigError(f"the labels {classes.tolist()} are not distinct as text; give distinct labels")
        self._fitting = classes  # becomes classes_ once the training succeeded
        return np.searchsorted(classes, y).astype(np.int64), {"classes": names}

    def _after_fit(self, store):
        from ..data.sequences import store_classes
        from ..data.store import StoredDataset

        self.classes_ = self._fitting
        stored = store_classes(StoredDataset(store)) or [str(c) for c in self.classes_]
        self._columns = [stored.index(str(c)) for c in self.classes_]  # logits column of each of classes_

    def predict_proba(self, X, t=None, mask=None) -> np.ndarray:
        """``(N, K)`` class probabilities (columns in the order of ``classes_``; rows sum to 1)."""
        logits = self._raw(X, t, mask)[:, self._columns]  # (refuses an estimator not fitted yet)
        return torch.softmax(logits.double(), -1).numpy()

    def predict(self, X, t=None, mask=None) -> np.ndarray:
        """``(N,)`` labels, values of ``classes_``."""
        columns = self._raw(X, t, mask)[:, self._columns].argmax(-1).numpy()
        return self.classes_[columns]

    def score(self, X, y, t=None, mask=None) -> float:
        """Accuracy on ``X``, ``y``: labels of the kind the classifier was fitted on (numbers or strings; a label
        it has not seen counts as wrong)."""
        self._raw_check()
        X, t, mask = check_series(X, t, mask, channels=self.n_features_in_)
        y = check_labels(y, len(X))
        if label_kind(y) != label_kind(self.classes_):
            fitted = label_kind(self.classes_)
            raise DataError(f"y holds {label_kind(y)} labels and the classifier was fitted on {fitted} labels "
                            f"({', '.join(map(str, self.classes_[:5]))}); give labels of the fitted kind")
        return float(np.mean(self.predict(X, t, mask) == y))


class SequenceRegressor(_SequenceEstimator):
    """Regresses one or more numbers per sequence with a sequence preset (module docstring)."""

    def _targets(self, y, n):
        y = check_targets(y, n)
        self._fitting = y.ndim == 2
        return y, {}

    def _after_fit(self, store):
        self._vector = self._fitting
        self._width = int(self.run_.task.n_targets) if self._vector else 1

    def predict(self, X, t=None, mask=None) -> np.ndarray:
        """``(N,)`` (or ``(N, k)`` for 2-D targets) predictions in the targets' units."""
        out = self._raw(X, t, mask).double().numpy()
        return out if self._vector else out[:, 0]

    def score(self, X, y, t=None, mask=None) -> float:
        """The coefficient of determination R^2 (``1 - SSE / SST`` per target, averaged over targets)."""
        self._raw_check()
        X, t, mask = check_series(X, t, mask, channels=self.n_features_in_)
        y = check_targets(y, len(X))
        if (y.ndim == 2) != self._vector or (y.ndim == 2 and y.shape[1] != self._width):
            raise DataError(f"y has shape {y.shape}; the regressor was fitted on targets of shape "
                            f"{('(N, ' + str(self._width) + ')') if self._vector else '(N,)'}")
        pred = self.predict(X, t, mask)
        y2, p2 = y.reshape(len(y), -1), pred.reshape(len(y), -1)
        sst = ((y2 - y2.mean(0)) ** 2).sum(0)
        sse = ((y2 - p2) ** 2).sum(0)
        return float(np.mean(np.where(sst > 0, 1.0 - sse / np.where(sst > 0, sst, 1.0), 0.0)))


__all__ = ("SequenceClassifier", "SequenceRegressor")
