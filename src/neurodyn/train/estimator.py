"""Scikit-learn-style estimators over every sequence preset: ``neurodyn.SequenceClassifier`` / ``SequenceRegressor``.

```python
clf = neurodyn.SequenceClassifier("gru/sequence", scale="cpu", run_dir="runs/mine", epochs=20)
clf.fit(X, y)                       # X (N, L, C) or (N, L) arrays or tensors; y (N,) labels of any kind
clf.predict(X_new); clf.predict_proba(X_new); clf.score(X_test, y_test)
```

``fit(X, y, t=None, mask=None)`` runs the preset's own training on the arrays, held in memory: they are read as the
``.npz`` reader reads a file holding them (:func:`neurodyn.data.memory_store.sequence_store`: the same sequences,
classes and masks as the store ``neurodyn convert`` would make), split and normalised by the preset's data section
(:func:`neurodyn.data.assembly.build_sequence_data`: the validation split ``data.n_val``, ``data.n_test=K`` held
out, ``data.missing``, ...), and trained by :func:`neurodyn.train.experiment.train_experiment` (the trainer, or a
fitted baseline's one pass). Without ``run_dir`` nothing is written anywhere: no data file, run folder or
temporary file; the estimator keeps the trained model. Given a ``run_dir``, the run is written there as ``neurodyn
train`` writes one (a marked run folder, ``config.yaml``, ``metrics.jsonl``, checkpoints, ``summary.md`` with the
majority and 1-NN baselines beside the model, on the validation split when no test split is held out; the data
recorded as ``data.arrays: sha256:<digest>`` and ``data.file``, their shapes and classes), resumed exactly by a later
``fit`` on the same arrays and settings (the trainer's resume), and a finished one is only reloaded; other arrays
or settings there are refused. ``predict`` then uses the run's checkpoint (``which``), as ``neurodyn.load_run`` does.
Predictions equal those of a run on the store converted from the same arrays (same preset, settings and seed).

Settings: ``model`` is any sequence preset (``nac/sequence``, ``gru/sequence``, ..., and the fitted baselines
``majority/sequence``, ``knn/sequence``, ``minirocket/sequence``, ``multirocket/sequence``, ``hydra/sequence``);
``scale``; ``overrides``, dot-list overrides
(``["model.hidden=16", "data.n_val=0"]``; not ``data.path`` / ``data.test_path``: the data are the arrays given to
``fit``, and ``score`` takes test arrays); any ``train.*`` option as a keyword (``epochs=5``, ``lr=1e-3``).

Inputs: ``X (N, L, C)`` (``(N, L)``: one channel), NaN for a missing value; ``t (N, L)`` or ``(L,)`` timestamps;
``mask (N, L)`` 1 on a real step. The classifier keeps the labels' own values (``classes_``, sorted): strings,
integers or anything NumPy sorts; ``predict`` returns them. Probabilities are the softmax of the model's logits
(for ``knn``: about 1 - 1e-6 (K - 1) for the neighbour's class; for ``minirocket``: a softmax of ridge scores, not
calibrated). The regressor takes ``y (N,)`` or ``(N, k)`` numbers.

Every array is checked as the converter checks a file (:mod:`neurodyn.data.sequence_arrays`: shapes, dtypes, NaN /
Inf, complex numbers, masks, timestamps in time order, label kinds) in ``fit``, ``predict``, ``predict_proba`` and
``score``, each problem one DataError; every setting (the preset, its overrides and train options, ``which``,
``device``, ``run_dir``, a ``train.logging`` log without a ``run_dir``) is checked before anything is written or
trained.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..data.sequence_arrays import check_labels, check_series, check_targets, label_kind
from ..errors import ConfigError, DataError


def arrays_section(data: dict[str, Any], store) -> dict[str, Any]:
    """The preset's ``data`` section for a training on the arrays of ``store`` (a :class:`~neurodyn.data.memory_store.
    MemoryStore`): its splits, normalisation and sequence options, without a file (``path``, ``test_path``; a
    given one is refused: the data are the arrays given to ``fit``) and with ``arrays``, the arrays' digest, which
    a run folder compares on resuming (other arrays are another training)."""
    for key in ("path", "test_path"):
        if data.get(key):
            raise ConfigError(
                f"data.{key}={data[key]!r}: the estimators train on the arrays given to fit (and score "
                "test arrays with .score(X, y)); drop the override, or train on a store file with "
                "`neurodyn train PRESET data.path=STORE`"
            )
    kept = {k: v for k, v in data.items() if k not in ("path", "test_path", "generator")}
    return {**kept, "arrays": f"sha256:{store.attrs['checksum'][:16]}"}


def in_memory_run(trained, which: str, n_val: int):
    """A :class:`~neurodyn.train.predict.TrainedRun` of a training held in memory (:class:`~neurodyn.train.
    experiment.TrainedExperiment`): the final model, or the best validation epoch's weights for ``which="best"``
    (and for ``"auto"`` where the validation split held at least ``MIN_VAL_FOR_BEST`` cases), as ``load_run`` picks
    a run folder's checkpoint."""
    from .predict import TrainedRun
    from .trainer import MIN_VAL_FOR_BEST

    best = trained.best_state is not None and (which == "best" or (which == "auto" and n_val >= MIN_VAL_FOR_BEST))
    if best:
        trained.model.load_state_dict(trained.best_state)
    trained.model.eval()
    return TrainedRun(trained.model, trained.task, trained.cfg, None, trained.train_config)


class _SequenceEstimator:
    """What the classifier and the regressor share (module docstring)."""

    classifier = False

    def __init__(
        self,
        model: str = "nac/sequence",
        *,
        scale: str = "cpu",
        run_dir: str | Path | None = None,
        overrides: list[str] | tuple[str, ...] = (),
        which: str = "last",
        device: str | torch.device = "cpu",
        progress: bool | None = False,
        **train_options: Any,
    ):
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
            raise ConfigError(
                f"which must be one of {', '.join(WHICH)} (the checkpoint predict uses); got {self.which!r}"
            )
        check_device(self.device, "device")
        if self.run_dir is not None:
            text = str(self.run_dir)
            if not text.strip() or "\0" in text:
                raise ConfigError(
                    f"run_dir {self.run_dir!r} is not a folder path; give a folder (or None: no run folder is kept)"
                )
            check_trainable(Path(self.run_dir), f"{type(self).__name__}.fit", "another run_dir")

    def fit(self, X, y, t=None, mask=None, *, interrupt_at=None):
        """Train the preset on ``X``, ``y`` (module docstring); returns ``self``. ``interrupt_at(epoch, batch)``:
        the trainer's test hook (a Ctrl-C at that batch)."""
        from ..data.assembly import build_sequence_data
        from ..data.memory_store import sequence_store
        from ..experiments import load_experiment
        from .experiment import check_config, train_experiment
        from .logs import parse_loggers
        from .predict import load_run

        X, t, mask = check_series(X, t, mask)
        y_store, extra = self._targets(y, len(X))
        arrays = {"x": np.where(mask[..., None], X, np.nan), "y": y_store, **extra}
        if t is not None:
            arrays["t"] = np.ascontiguousarray(t)
        if not mask.all():
            arrays["mask"] = mask.astype(np.int8)
        options = [f"train.{k}={json.dumps(v)}" for k, v in self.train_options.items()]
        cfg = load_experiment(self.model, self.scale, [*self.overrides, *options])  # a bad name fails before any work
        if cfg.get("task") != "sequence":
            raise ConfigError(
                f"model {self.model!r} is a preset of the {cfg.get('task')!r} task; the sequence "
                "estimators take a sequence preset (nac/sequence, gru/sequence, knn/sequence, ...)"
            )
        self._check_options()
        tcfg = check_config(cfg, self.device, data=False)  # the train options and model keys, before any work
        if self.run_dir is None and parse_loggers(tcfg.logging.to):
            raise ConfigError(
                f"train.logging.to={tcfg.logging.to!r} writes logs into a run folder; give run_dir=... "
                "or leave train.logging.to at none"
            )
        store = sequence_store(arrays)
        cfg = {**cfg, "data": arrays_section(cfg.get("data") or {}, store)}
        data = build_sequence_data(cfg, store, record=store.record())  # every data value checked, nothing written
        if self.which == "best" and "val" not in data["sets"]:
            raise ConfigError(
                "which='best' predicts with the best validation epoch, and data.n_val leaves no "
                "validation split; use which='last' (or 'auto'), or give data.n_val > 0"
            )
        trained = train_experiment(
            cfg,
            self.run_dir,
            device=self.device,
            resume=True,
            progress=self.progress,
            interrupt_at=interrupt_at,
            data=data,
        )
        if self.run_dir is not None:
            self.run_dir_ = Path(self.run_dir)
            self.run_ = load_run(self.run_dir_, which=self.which, device=self.device)
        else:
            self.run_dir_ = None
            self.run_ = in_memory_run(trained, self.which, n_val=len(getattr(data["sets"].get("val"), "ids", ())))
        self.metrics_ = trained.metrics
        self.n_features_in_ = X.shape[2]
        self._after_fit(store)
        return self

    def _after_fit(self, store) -> None:
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

        self.classes_ = self._fitting
        stored = store_classes(store) or [str(c) for c in self.classes_]
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
            raise DataError(
                f"y holds {label_kind(y)} labels and the classifier was fitted on {fitted} labels "
                f"({', '.join(map(str, self.classes_[:5]))}); give labels of the fitted kind"
            )
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
            raise DataError(
                f"y has shape {y.shape}; the regressor was fitted on targets of shape "
                f"{('(N, ' + str(self._width) + ')') if self._vector else '(N,)'}"
            )
        pred = self.predict(X, t, mask)
        y2, p2 = y.reshape(len(y), -1), pred.reshape(len(y), -1)
        sst = ((y2 - y2.mean(0)) ** 2).sum(0)
        sse = ((y2 - p2) ** 2).sum(0)
        return float(np.mean(np.where(sst > 0, 1.0 - sse / np.where(sst > 0, sst, 1.0), 0.0)))


__all__ = ("SequenceClassifier", "SequenceRegressor")
