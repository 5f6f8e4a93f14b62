"""Irregularly sampled multivariate activity classification (stand-in for the paper's PAR, §3.1).

Sources:

* ``synthetic`` (default, no download, no extra package): a person-activity-like generator built
  after UCI's *Localization Data for Person Activity*. Four body tags (left/right ankle, chest,
  belt) report 3-D positions one at a time at random (Poisson) instants, so each step is
  ``[one-hot tag (4), x, y, z]`` (7 features, the PAR encoding of Lechner & Hasani) with an
  irregular timestamp. Each of ``n_classes`` activities has, per tag, a posture (mean position) and
  a periodic motion (amplitude per axis, a cadence shared by the tags), drawn once from
  ``template_seed``; a sequence adds a random person offset and height scale, cadence and amplitude
  jitter, a phase per tag, and noise. ``separation`` scales how far class postures differ (smaller
  is harder). Label: the activity (per sequence).
* ``basicmotions``: the BasicMotions set that ships inside the ``sktime`` package (accelerometer +
  gyroscope, 6 channels x 100 steps at 10 Hz, 4 activities; 40 train + 40 test cases: samples
  0..39 are TRAIN, 40..79 TEST, so ``n_train=40, n_test=40``). Made irregular by keeping each
  step with probability ``keep_prob`` (per sample, from the seed); ``t`` = step index / 10 s.
* ``par``: the real UCI file ``ConfLongDemo_JSI.txt`` at ``source_path``: each recording cut into chunks
  of ``max_len`` readings (``[one-hot tag, x, y, z]``, ``t`` in seconds from the chunk's start),
  labels per step (11 activities), i.e. the paper's per-time-step classification.

The real files are read by the converter through ``base.real_file`` (:mod:`neurodyn.data.formats.ts` for BasicMotions,
:mod:`neurodyn.data.formats.person_activity` for ``par``, with a one-line note naming ``neurodyn convert
ConfLongDemo_JSI.txt kind=person-activity chunk=64``, the one route for real files); this module only generates.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from ...errors import ConfigError, DataError
from ..sequence_store import pad_sequences, take_sequences
from .base import Generator, check_source, real_file, register_generator, sample_seed


@dataclass
class ActivityConfig:
    source: str = "synthetic"  # synthetic | basicmotions | par
    source_path: str = ""  # par: ConfLongDemo_JSI.txt
    n_classes: int = 6
    min_len: int = 48  # synthetic: readings per sequence, uniform in [min_len, max_len]
    max_len: int = 96  # padded length (par: chunk length)
    rate: float = 8.0  # synthetic: readings per second (all tags together)
    separation: float = 0.6  # synthetic: spread of class postures (smaller is harder)
    noise: float = 0.15  # synthetic: reading noise
    keep_prob: float = 0.6  # basicmotions: probability of keeping each step
    template_seed: int = 1234  # synthetic: the activities themselves


def _templates(cfg: ActivityConfig) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(cfg.template_seed)
    k = cfg.n_classes
    base = np.array([[-0.15, 0.0, 0.1], [0.15, 0.0, 0.1], [0.0, 0.0, 1.3], [0.0, 0.0, 1.0]])  # tag postures (m)
    return {
        "posture": base[None] + cfg.separation * rng.normal(0, 0.35, (k, 4, 3)),
        "amplitude": np.abs(rng.normal(0, 0.12, (k, 4, 3))) * rng.choice([0.3, 1.0, 2.0], (k, 1, 1)),
        "cadence": rng.uniform(0.4, 2.2, k),
    }


def sktime_dataset_path(name: str, split: str) -> Path:
    """Path of a .ts file shipped inside the installed ``sktime`` package (found without importing it; read by the
    converter's ``.ts`` reader)."""
    import importlib.util

    spec = importlib.util.find_spec("sktime")
    if spec is None or not spec.submodule_search_locations:
        raise DataError(
            f"the {name} data ships with the 'sktime' package, which is not installed; "
            "`pip install sktime`, or use source=synthetic"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    path = root / "datasets" / "data" / name / f"{name}_{split.upper()}.ts"
    if not path.exists():
        raise DataError(f"sktime at {root} does not ship {path.name}")
    return path


@lru_cache(maxsize=1)
def _basicmotions() -> tuple[np.ndarray, np.ndarray, int]:
    """BasicMotions TRAIN then TEST, read by the converter's ``.ts`` reader: ``x (80, 100, 6)``, ``y (80,)`` (the
    class names sorted), the class count."""
    paths = [sktime_dataset_path("BasicMotions", split) for split in ("train", "test")]
    classes = tuple(sorted(real_file("activity", "basicmotions", paths[0], "uea-ts", note=False).info["classes"]))
    stores = [real_file("activity", "basicmotions", p, "uea-ts", note=False, classes=classes) for p in paths]
    n = max(s.read("fields/x").shape[1] for s in stores)
    x = np.concatenate(
        [np.pad(s.read("fields/x"), ((0, 0), (0, n - s.read("fields/x").shape[1]), (0, 0))) for s in stores]
    )
    return x, np.concatenate([s.read("fields/y") for s in stores]).astype(np.int64), len(classes)


@register_generator
class ActivityGenerator(
    Generator, name="activity", config=ActivityConfig, inputs=("x", "t", "mask"), targets=("y",), chunk_size=256
):
    def validate(self, cfg: ActivityConfig) -> None:
        check_source("activity", cfg, ("synthetic", "basicmotions", "par"), ("par",), "UCI's ConfLongDemo_JSI.txt")
        if cfg.n_classes < 2:
            raise ConfigError(f"activity n_classes must be >= 2, got {cfg.n_classes}")
        if not 1 <= cfg.min_len <= cfg.max_len:
            raise ConfigError(f"activity needs 1 <= min_len <= max_len, got {cfg.min_len}, {cfg.max_len}")
        if not (cfg.rate > 0 and 0 < cfg.keep_prob <= 1 and cfg.noise >= 0 and cfg.separation >= 0):
            raise ConfigError("activity needs rate > 0, 0 < keep_prob <= 1, noise >= 0, separation >= 0")

    def tag(self, cfg: ActivityConfig) -> str:
        return cfg.source

    def coords(self, cfg: ActivityConfig) -> dict[str, np.ndarray]:
        if cfg.source == "basicmotions":
            return {"n_classes": np.array(_basicmotions()[2])}
        if cfg.source == "par":
            return {"n_classes": np.array(11)}
        return {"n_classes": np.array(cfg.n_classes)}

    def generate(self, cfg: ActivityConfig, ids: np.ndarray, seed: int, device: torch.device) -> dict[str, np.ndarray]:
        if cfg.source == "basicmotions":
            return self._basicmotions(cfg, ids, seed)
        if cfg.source == "par":
            return self._par(cfg, ids)
        tpl = _templates(cfg)
        xs, ts, ys = [], [], []
        for i in ids:
            rng = np.random.default_rng(sample_seed(seed, int(i)))
            c = int(rng.integers(cfg.n_classes))
            n = int(rng.integers(cfg.min_len, cfg.max_len + 1))
            t = np.cumsum(rng.exponential(1.0 / cfg.rate, n))
            tag = rng.integers(0, 4, n)
            cad = tpl["cadence"][c] * rng.uniform(0.85, 1.15)
            phase = rng.uniform(0, 2 * np.pi, 4)
            offset = np.array([rng.normal(0, 0.3), rng.normal(0, 0.3), 0.0])
            height = rng.uniform(0.85, 1.15)
            amp = tpl["amplitude"][c][tag] * rng.uniform(0.7, 1.3)
            pos = tpl["posture"][c][tag] * np.array([1.0, 1.0, height]) + offset
            pos = pos + amp * np.sin(2 * np.pi * cad * t + phase[tag])[:, None]
            pos = pos + rng.normal(0, cfg.noise, pos.shape)
            onehot = np.eye(4)[tag]
            xs.append(np.concatenate([onehot, pos], 1).astype(np.float32))
            ts.append(t.astype(np.float32))
            ys.append(c)
        return self._pack(xs, ts, np.asarray(ys, dtype=np.int64), cfg.max_len)

    def _basicmotions(self, cfg: ActivityConfig, ids: np.ndarray, seed: int) -> dict[str, np.ndarray]:
        x_all, y_all, _ = _basicmotions()
        if int(ids.max()) >= len(x_all):
            raise DataError(f"BasicMotions has {len(x_all)} cases; cannot make sample {int(ids.max())}")
        xs, ts = [], []
        for i in ids:
            rng = np.random.default_rng(sample_seed(seed, int(i)))
            a = x_all[i]
            keep = rng.random(len(a)) < cfg.keep_prob
            keep[0] = True
            xs.append(a[keep])
            ts.append((np.flatnonzero(keep) / 10.0).astype(np.float32))
        return self._pack(xs, ts, y_all[ids], max(cfg.max_len, x_all.shape[1]))

    def _par(self, cfg: ActivityConfig, ids: np.ndarray) -> dict[str, np.ndarray]:
        data = real_file("activity", "par", cfg.source_path, "person-activity", chunk=cfg.max_len)
        if int(ids.max()) >= data.n_samples:
            raise DataError(
                f"{cfg.source_path} gives {data.n_samples} chunks of {cfg.max_len} readings; cannot make "
                f"sample {int(ids.max())}"
            )
        out = take_sequences(data, ids, cfg.max_len)
        return {k: out[k] for k in ("fields/x", "fields/t", "fields/mask", "fields/y")} | {
            "params/length": out["fields/mask"].sum(1).astype(np.int64)
        }

    @staticmethod
    def _pack(xs, ts, y, length: int) -> dict[str, np.ndarray]:
        x, mask = pad_sequences(xs, length)
        t, _ = pad_sequences(ts, length)
        last = np.take_along_axis(t, np.maximum(mask.sum(1, keepdims=True) - 1, 0), 1)
        t = np.where(mask.astype(bool), t, last)
        x = np.nan_to_num(x)
        return {
            "fields/x": x.astype(np.float32),
            "fields/t": t.astype(np.float32),
            "fields/mask": mask,
            "fields/y": y,
            "params/length": mask.sum(1).astype(np.int64),
        }
