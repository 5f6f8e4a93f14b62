"""Event-based digits: the event-based MNIST transformation (Lechner & Hasani 2022; NAC paper §3.1, D.3.1).

An image is thresholded to binary, flattened row by row into a sequence of ``L`` pixels and
event-encoded by collapsing runs of equal values: ``[1, 1, 1, 1] -> (value 1, duration 4)``. Each
event is one step with features ``(value, duration / width)`` and timestamp ``t = end of the run / L``
(so one pixel is one unit of time, rescaled to ``(0, 1]``); sequences are padded to ``max_len``.

Sources:

* ``sklearn`` (default, offline): scikit-learn's bundled 8x8 digits (1,797 images, intensities
  0..16, threshold 8 = half range as 128/255 for MNIST), 64 pixels -> 15..29 events (mean 19.9),
  padded to 32. Samples are a fixed permutation (from ``seed``) of the 1,797 images.
* ``mnist``: the real MNIST files at ``source_path`` (IDX folder or Keras' mnist.npz), threshold 128, 784
  pixels -> about 53 events, padded to 256 as the paper. Samples are the 60,000 training images then the
  10,000 test images, in file order (``n_train=60000, n_test=10000`` is the standard split). The files are read
  and encoded by the converter (the reader :mod:`neurodyn.data.formats.mnist`, reached through ``base.real_file``
  with a one-line note naming ``neurodyn convert MNIST_FOLDER kind=mnist``, the one route for real files).

Both sources encode with ``event_encode`` of :mod:`neurodyn.data.features.events`.

Fields: ``x (N, max_len, 2)``, ``t``, ``mask``, ``y (N,)`` the digit; ``params/source_index``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from ...errors import ConfigError, DataError
from ..features.events import event_encode
from ..sequence_store import pad_sequences, take_sequences
from .base import Generator, check_source, real_file, register_generator


@dataclass
class EventDigitsConfig:
    source: str = "sklearn"  # sklearn | mnist
    source_path: str = ""  # mnist: folder of IDX files or mnist.npz
    threshold: float = 0.0  # pixel >= threshold is 1 (0: 8 for sklearn, 128 for mnist)
    max_len: int = 0  # events kept per sequence (0: 32 sklearn, 256 mnist)
    shuffle: bool = True  # sklearn only: permute the images by the seed


@lru_cache(maxsize=1)
def _sklearn_digits():
    """scikit-learn's bundled digits (``sklearn/datasets/data/digits.csv.gz``: 64 pixels then the label
    per row), read straight from the installed package: importing sklearn itself takes seconds."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("event_digits source=sklearn needs scikit-learn (`pip install scikit-learn`)")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
    if not path.exists():  # pragma: no cover - a future layout: fall back to the public loader
        from sklearn.datasets import load_digits

        d = load_digits()
        return d.images, d.target.astype(np.int64)
    data = np.loadtxt(path, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(np.int64)


@register_generator
class EventDigitsGenerator(
    Generator, name="event_digits", config=EventDigitsConfig, inputs=("x", "t", "mask"), targets=("y",), chunk_size=512
):
    def validate(self, cfg: EventDigitsConfig) -> None:
        check_source("event_digits", cfg, ("sklearn", "mnist"), ("mnist",), "folder of MNIST IDX files or mnist.npz")
        if cfg.max_len < 0 or cfg.threshold < 0:
            raise ConfigError("event_digits max_len and threshold must be >= 0")

    def tag(self, cfg: EventDigitsConfig) -> str:
        return cfg.source

    def coords(self, cfg: EventDigitsConfig) -> dict[str, np.ndarray]:
        return {"n_classes": np.array(10)}

    def generate(
        self, cfg: EventDigitsConfig, ids: np.ndarray, seed: int, device: torch.device
    ) -> dict[str, np.ndarray]:
        thr = cfg.threshold or (8.0 if cfg.source == "sklearn" else 128.0)
        max_len = cfg.max_len or (32 if cfg.source == "sklearn" else 256)
        if cfg.source == "mnist":
            return self._mnist(cfg, ids, thr, max_len)
        images, labels = _sklearn_digits()
        n = len(images)
        if int(ids.max()) >= n:
            raise DataError(f"event_digits source {cfg.source} has {n} images; cannot make sample {int(ids.max())}")
        src = np.random.default_rng(seed).permutation(n)[ids] if cfg.shuffle else np.asarray(ids)
        width = images.shape[-1]
        feats, times = zip(*(event_encode(images[i].reshape(-1) >= thr, width) for i in src))
        x, mask = pad_sequences(feats, max_len)
        t, _ = pad_sequences(times, max_len)
        # padded timestamps repeat the last valid one (harmless, and keeps t non-decreasing)
        last = np.take_along_axis(t, np.maximum(mask.sum(1, keepdims=True) - 1, 0), 1)
        t = np.where(mask.astype(bool), t, last)
        return {
            "fields/x": x,
            "fields/t": t,
            "fields/mask": mask,
            "fields/y": labels[src],
            "params/source_index": src.astype(np.int64),
        }

    def _mnist(self, cfg: EventDigitsConfig, ids: np.ndarray, threshold: float, max_len: int) -> dict[str, np.ndarray]:
        """MNIST images ``ids`` (file order) as events, encoded by the converter's MNIST reader."""
        data = real_file(
            "event_digits", "mnist", cfg.source_path, "mnist", threshold=float(threshold), max_len=int(max_len)
        )
        if int(ids.max()) >= data.n_samples:
            raise DataError(
                f"event_digits source {cfg.source} has {data.n_samples} images; cannot make sample {int(ids.max())}"
            )
        out = take_sequences(data, ids, max_len)
        return {k: out[k] for k in ("fields/x", "fields/t", "fields/mask", "fields/y")} | {
            "params/source_index": np.asarray(ids, dtype=np.int64)
        }
