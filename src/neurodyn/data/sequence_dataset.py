"""The torch Dataset over a sequence store (:mod:`neurodyn.data.sequence_store`'s layout): one split's sequences,
their missing values filled or dropped (:mod:`neurodyn.data.sequence_missing`), long ones pooled in time
(:mod:`neurodyn.data.sequence_pooling`), class indices mapped to the training data's.

``SequenceDataset`` items are ``{"x": (T, C), "t": (T,), "mask": (T,) bool, "y": ..., "index": ()}``
with every sequence padded (or cut) to one length ``T``. With ``window > 0`` a dataset of per-step
targets yields windows of ``window`` consecutive valid steps whose target is the last step's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from ..errors import ConfigError, DataError
from .sequence_missing import MISSING, compact_steps, kept_steps, model_inputs
from .sequence_pooling import pool_factor, pool_in_time
from .sequence_store import check_sequence_arrays
from .store import StoredDataset


class SequenceDataset(Dataset):
    """Sequences ``ids`` of a sequence store file, padded to ``max_len`` (default: the stored length).

    ``kind`` is ``"classification"`` (integer ``y``) or ``"regression"`` (float ``y``);
    ``per_step`` is True when targets are per time step (and no ``window`` is used). ``window > 0``
    turns per-step targets into windows ending at every ``window_stride``-th valid step from
    ``window - 1`` on, target = the window's last step; ``relative_time`` then shifts each window's
    timestamps to start at 0. ``max_steps`` and ``pool_from``: time pooling of long sequences
    (:mod:`neurodyn.data.sequence_pooling`);
    ``self.pool`` is the factor ``k`` applied (1: none), ``self.raw_steps`` the length before it and
    ``self.max_steps`` the option that chose it (:func:`~neurodyn.data.sequence_pooling.describe_pooling`).
    """

    def __init__(
        self,
        store: StoredDataset,
        ids: np.ndarray,
        max_len: int | None = None,
        window: int = 0,
        window_stride: int = 1,
        relative_time: bool = True,
        missing: str = "ffill",
        observed_channels: bool = False,
        drop_steps: float = 0.0,
        drop_seed: int = 0,
        classes: Sequence[str] | None = None,
        max_steps: int | str | None = 0,
        pool_from: int | None = None,
    ):
        _check_options(store, missing, drop_steps)
        self.store = store
        self.ids = np.asarray(ids, dtype=np.int64)
        x, t, m, y, obs = _read_split(store, self.ids)
        self.kind = "classification" if np.issubdtype(y.dtype, np.integer) else "regression"
        per_step = y.ndim >= 2 and y.shape[1] == x.shape[1] and (self.kind == "classification" or y.ndim == 3)
        keep = kept_steps(store, self.ids, m, obs, missing, float(drop_steps), int(drop_seed))
        if not np.array_equal(keep, m):
            x, t, m, y, obs = compact_steps(keep, x, t, y if per_step else None, obs, y)
        self.pool = pool_factor(max_steps, int(pool_from or x.shape[1]), per_step)
        self.raw_steps, self.max_steps = int(x.shape[1]), max_steps
        if self.pool > 1:
            x, t, m, obs = pool_in_time(x, t, m, obs, self.pool)
        x, measured = model_inputs(x, obs, m, missing, observed_channels)
        self.measured = None if measured is None else torch.from_numpy(measured)
        self.missing, self.observed_channels, self.drop_steps = missing, bool(observed_channels), float(drop_steps)
        self.classes = store_classes(store)
        if classes is not None and self.kind == "classification":
            y = self._to_training_classes(y, list(classes), m if per_step else None)
        if self.kind == "regression" and y.ndim == 1:
            y = y[:, None]
        lengths = m.sum(1)
        if len(lengths) and lengths.min() < 1:
            raise DataError(
                f"dataset file {store.path}: sequence {int(self.ids[np.argmin(lengths)])} has no valid step"
            )
        self.n_classes = self._count_classes(classes) if self.kind == "classification" else None
        self.n_targets = self.n_classes if self.kind == "classification" else int(y.shape[-1])
        self._set_items(lengths, per_step, y, int(window), window_stride, max_len, x.shape[1])
        self.relative_time = relative_time
        self.x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        self.t = torch.from_numpy(np.ascontiguousarray(t, dtype=np.float32))
        self.m = torch.from_numpy(m.astype(bool))
        self.y = (
            torch.from_numpy(np.ascontiguousarray(y)).long()
            if self.kind == "classification"
            else torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32))
        )
        self.in_channels = int(x.shape[-1])

    def _count_classes(self, classes: Sequence[str] | None) -> int:
        """The training data's class count, else the store's ``coords/n_classes``, else the largest label + 1."""
        if classes is not None and self.classes is not None:
            return len(classes)
        if "coords/n_classes" in self.store.shapes:
            return int(np.asarray(self.store.read("coords/n_classes", ())).reshape(-1)[0])
        return int(self.store.read("fields/y").max()) + 1

    def _set_items(
        self,
        lengths: np.ndarray,
        per_step: bool,
        y: np.ndarray,
        window: int,
        window_stride: int,
        max_len: int | None,
        T: int,
    ) -> None:
        """``self.items``: ``(sequence, window end)`` pairs (``-1``: the whole sequence), and the item length."""
        path = self.store.path
        self.window = window
        if window < 0 or window_stride < 1:
            raise DataError(f"sequence windows need window >= 0 and window_stride >= 1, got {window}, {window_stride}")
        if not window:
            self.length = int(max_len or T)
            if self.length < 1:
                raise DataError(f"data.max_len must be >= 1, got {max_len}")
            self.items = [(i, -1) for i in range(len(self.ids))]
            self.per_step = per_step
            return
        if not per_step:
            raise DataError(
                f"dataset file {path}: data.window needs per-step targets (fields/y of shape "
                f"(N, T, ...)), got fields/y of shape {y.shape}"
            )
        self.items = [(i, e) for i, n in enumerate(lengths) for e in range(window - 1, int(n), window_stride)]
        if not self.items:
            raise DataError(f"dataset file {path}: no sequence has {window} valid steps for data.window")
        self.length, self.per_step = window, False

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        j, end = self.items[i]
        if end >= 0:
            sl = slice(end - self.window + 1, end + 1)
            x, t, m, y = self.x[j, sl], self.t[j, sl], self.m[j, sl], self.y[j, end]
            if self.relative_time:
                t = t - t[0]
        else:
            L, T = self.length, self.x.shape[1]
            x, t, m = self.x[j, :L], self.t[j, :L], self.m[j, :L]
            y = self.y[j, :L] if self.per_step else self.y[j]
            if L > T:
                pad = L - T
                x = torch.cat([x, x.new_zeros(pad, x.shape[1])])
                t = torch.cat([t, t[-1:].expand(pad)])
                m = torch.cat([m, m.new_zeros(pad)])
                if self.per_step:
                    y = torch.cat([y, y.new_zeros(pad, *y.shape[1:])])
        return {"x": x, "t": t, "mask": m, "y": y, "index": torch.tensor(int(self.ids[j]))}

    def valid_steps(self) -> torch.Tensor:
        """Every valid observation of this split, ``(N_valid, C)`` (to fit the input normalizer). A value that was
        not measured (filled, or still NaN) counts as its channel's mean over the measured ones, so the
        statistics are those of the measured values (the spread slightly shrunk by the count)."""
        steps = self.x[self.m]
        if self.measured is not None:
            steps = torch.where(self.measured[self.m], steps, torch.full_like(steps, float("nan")))
        nan = torch.isnan(steps)
        if nan.any():
            mean = torch.nanmean(steps, dim=0).nan_to_num(0.0)
            steps = torch.where(nan, mean.expand_as(steps), steps)
        return steps

    def _to_training_classes(self, y: np.ndarray, training: list[str], step_mask: np.ndarray | None) -> np.ndarray:
        """``y`` re-indexed from this file's class names to the training data's (a test file converted on its own
        may hold fewer classes, in another order); a class the training data lacks is one DataError."""
        own = self.classes
        if own is None or own == training:
            return y
        unknown = [c for c in own if c not in training]
        used = np.unique(y[step_mask] if step_mask is not None else y)
        unknown = [own[k] for k in used if 0 <= k < len(own) and own[k] in unknown]
        if unknown:
            raise DataError(
                f"dataset file {self.store.path} holds class {unknown[0]!r}, which the training data does "
                f"not have (its classes: {', '.join(training)})"
            )
        lookup = np.asarray([training.index(c) if c in training else -1 for c in own], dtype=np.int64)
        return lookup[np.clip(y, 0, len(own) - 1)]

    def targets(self) -> torch.Tensor:
        """Regression targets of this split's items, ``(N_items, k)`` (to fit the target normalizer)."""
        if self.kind != "regression":
            raise DataError("targets() is for regression sets")
        if self.window:
            return torch.stack([self.y[j, e] for j, e in self.items])
        return self.y[self.m] if self.per_step else self.y


def _check_options(store: StoredDataset, missing: str, drop_steps) -> None:
    for key in ("fields/x", "fields/t", "fields/mask", "fields/y"):
        if key not in store.shapes:
            raise DataError(
                f"dataset file {store.path} is not a sequence dataset: it lacks {key!r} (it has {sorted(store.shapes)})"
            )
    if missing not in MISSING:
        raise ConfigError(f"data.missing must be one of {', '.join(MISSING)}, got {missing!r}")
    if isinstance(drop_steps, bool) or not isinstance(drop_steps, (int, float)) or not 0 <= drop_steps < 1:
        raise ConfigError(
            f"data.drop_steps is the fraction of each sequence's steps dropped, in [0, 1); got {drop_steps!r}"
        )


def _read_split(store: StoredDataset, ids: np.ndarray):
    """``x, t, mask (bool), y, observed (bool or None)`` of the samples ``ids`` (in that order), checked."""
    order = np.argsort(ids)
    inv = np.argsort(order)
    read = lambda k: store.read(k, ids[order])[inv] if len(ids) else store.read(k, slice(0, 0))
    x, t, m, y = (read(k) for k in ("fields/x", "fields/t", "fields/mask", "fields/y"))
    check_sequence_arrays({"fields/x": x, "fields/t": t, "fields/mask": m, "fields/y": y}, str(store.path))
    obs = read("fields/observed").astype(bool) if "fields/observed" in store.shapes else None
    if obs is not None and obs.shape != x.shape:
        raise DataError(
            f"dataset file {store.path}: fields/observed {obs.shape} must have the shape of fields/x {x.shape}"
        )
    m = m.astype(bool)
    values = x if obs is None else np.where(obs, x, 0.0)
    if not np.isfinite(values[m]).all() or not np.isfinite(t[m]).all():
        raise DataError(f"dataset file {store.path}: NaN or Inf in the valid steps of fields/x or fields/t")
    return x, t, m, y, obs


def store_classes(store: StoredDataset) -> list[str] | None:
    """The class names of a converted store (``info.classes`` of its config), in index order; ``None`` for a store
    that names none (the generators' stores)."""
    info = store.config.get("info") if isinstance(store.config, dict) else None
    classes = info.get("classes") if isinstance(info, dict) else None
    return [str(c) for c in classes] if classes else None


__all__ = ["SequenceDataset", "store_classes"]
