"""Ragged, irregularly sampled sequences: the store layout and the torch Dataset over it.

Store layout written by the sequence generators (``event_digits``, ``activity``, ``bearing``)::

    fields/x     (N, T_max, C) float32   observations, zero after the end of a sequence
    fields/t     (N, T_max)    float32   timestamps (non-decreasing over the valid steps)
    fields/mask  (N, T_max)    uint8     1 for real steps; each sequence is a prefix of T_max
    fields/y     (N,) int64              class per sequence, or (N, k) float32 regression targets,
                                          or (N, T_max) int64 / (N, T_max, k) float32 per step
    fields/observed (N, T_max, C) uint8  optional (converted files with missing values): 1 where observed
    params/...   per-sequence extras (condition, source index, ...)
    coords/n_classes  () int             for classification sets

Stores converted from a user's files (``neurodyn generate --from``, :mod:`neurodyn.data.formats.timeseries`)
also name their classes in the config (``info.classes``).

Missing values (``fields/observed``), option ``missing``: every model takes one mask per step (padding), so a
value missing at a step where other channels were observed is filled, never left at zero silently:

* ``ffill`` (default): the channel's last observed value in the sequence (its first one before that); a channel
  never observed in the sequence gets the training mean (NaN here, 0 after the task's normalisation);
* ``mean``: the training mean (NaN here, 0 after normalisation);
* ``drop``: a step with any missing channel is removed, its timestamp with it (the rest stay in order).

``observed_channels=True`` appends the ``C`` observed indicators (1 observed, 0 filled) as input channels, so a
model can tell a filled value from a measured one.

Irregular sampling from regular data (``drop_steps``): a fraction of each sequence's steps is removed at
random (the rest keep their timestamps), a fixed draw per sequence from (``drop_seed``, the file's checksum,
the sample index), so the train, validation and test splits and every re-run see the same sequences.

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
from .store import StoredDataset

MISSING = ("ffill", "mean", "drop")


def pad_sequences(seqs: Sequence[np.ndarray], length: int, fill: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Stack ragged ``(T_i, ...)`` arrays into ``(N, length, ...)`` (cut if longer) and a ``(N, length)`` uint8 mask."""
    if not len(seqs):
        raise DataError("pad_sequences needs at least one sequence")
    tail = np.asarray(seqs[0]).shape[1:]
    out = np.full((len(seqs), length, *tail), fill, dtype=np.asarray(seqs[0]).dtype)
    mask = np.zeros((len(seqs), length), dtype=np.uint8)
    for i, s in enumerate(seqs):
        s = np.asarray(s)
        n = min(len(s), length)
        out[i, :n] = s[:n]
        mask[i, :n] = 1
    return out, mask


def check_sequence_arrays(arrays: dict[str, np.ndarray], where: str) -> None:
    """One-sentence errors for sequence arrays that do not fit together."""
    for key in ("fields/x", "fields/t", "fields/mask", "fields/y"):
        if key not in arrays:
            raise DataError(f"{where}: sequence data needs {key!r}; got {sorted(arrays)}")
    x, t, m = arrays["fields/x"], arrays["fields/t"], arrays["fields/mask"]
    if x.ndim != 3:
        raise DataError(f"{where}: fields/x must be (N, T, C), got shape {x.shape}")
    if t.shape != x.shape[:2] or m.shape != x.shape[:2]:
        raise DataError(f"{where}: fields/t {t.shape} and fields/mask {m.shape} must both be (N, T) = {x.shape[:2]}")


class SequenceDataset(Dataset):
    """Sequences ``ids`` of a sequence store file, padded to ``max_len`` (default: the stored length).

    ``kind`` is ``"classification"`` (integer ``y``) or ``"regression"`` (float ``y``);
    ``per_step`` is True when targets are per time step (and no ``window`` is used). ``window > 0``
    turns per-step targets into windows ending at every ``window_stride``-th valid step from
    ``window - 1`` on, target = the window's last step; ``relative_time`` then shifts each window's
    timestamps to start at 0.
    """

    def __init__(self, store: StoredDataset, ids: np.ndarray, max_len: int | None = None, window: int = 0,
                 window_stride: int = 1, relative_time: bool = True, missing: str = "ffill",
                 observed_channels: bool = False, drop_steps: float = 0.0, drop_seed: int = 0,
                 classes: Sequence[str] | None = None):
        for key in ("fields/x", "fields/t", "fields/mask", "fields/y"):
            if key not in store.shapes:
                raise DataError(f"dataset file {store.path} is not a sequence dataset: it lacks {key!r} "
                                f"(it has {sorted(store.shapes)})")
        if missing not in MISSING:
            raise ConfigError(f"data.missing must be one of {', '.join(MISSING)}, got {missing!r}")
        if isinstance(drop_steps, bool) or not isinstance(drop_steps, (int, float)) or not 0 <= drop_steps < 1:
            raise ConfigError(f"data.drop_steps is the fraction of each sequence's steps dropped, in [0, 1); got "
                              f"{drop_steps!r}")
        self.store = store
        self.ids = np.asarray(ids, dtype=np.int64)
        order = np.argsort(self.ids)
        inv = np.argsort(order)
        read = lambda k: store.read(k, self.ids[order])[inv] if len(self.ids) else store.read(k, slice(0, 0))
        x, t, m, y = (read(k) for k in ("fields/x", "fields/t", "fields/mask", "fields/y"))
        check_sequence_arrays({"fields/x": x, "fields/t": t, "fields/mask": m, "fields/y": y}, str(store.path))
        T = x.shape[1]
        obs = read("fields/observed").astype(bool) if "fields/observed" in store.shapes else None
        if obs is not None and obs.shape != x.shape:
            raise DataError(f"dataset file {store.path}: fields/observed {obs.shape} must have the shape of fields/x "
                            f"{x.shape}")
        m = m.astype(bool)
        values = x if obs is None else np.where(obs, x, 0.0)
        if not np.isfinite(values[m]).all() or not np.isfinite(t[m]).all():
            raise DataError(f"dataset file {store.path}: NaN or Inf in the valid steps of fields/x or fields/t")
        self.kind = "classification" if np.issubdtype(y.dtype, np.integer) else "regression"
        step_targets = y.ndim >= 2 and y.shape[1] == T and (self.kind == "classification" or y.ndim == 3)
        keep = m.copy()
        if obs is not None and missing == "drop":
            keep &= obs.all(-1)
            emptied = m.any(1) & ~keep.any(1)
            if emptied.any():
                raise DataError(f"dataset file {store.path}: sequence {int(self.ids[np.argmax(emptied)])} has no step "
                                "at which every channel is observed, so data.missing=drop leaves nothing of it; use "
                                "data.missing=ffill or mean")
        if drop_steps:
            keep = _drop_at_random(keep, float(drop_steps), int(drop_seed), _file_salt(store), self.ids)
        if not np.array_equal(keep, m):
            x, t, m, y, obs = _compact(keep, x, t, y if step_targets else None, obs, y)
        measured = None
        if obs is not None:
            x = _fill_missing(x.astype(np.float32), obs, m, missing)
            measured = obs
        if observed_channels:
            ind = obs if obs is not None else np.ones(x.shape, dtype=bool)
            x = np.concatenate([x, (ind & m[..., None]).astype(np.float32)], axis=-1)
            if measured is not None:
                measured = np.concatenate([measured, np.ones_like(measured)], axis=-1)
        self.measured = None if measured is None else torch.from_numpy(measured & m[..., None])
        self.missing, self.observed_channels, self.drop_steps = missing, bool(observed_channels), float(drop_steps)
        self.classes = store_classes(store)
        if classes is not None and self.kind == "classification":
            y = self._to_training_classes(y, list(classes), m if step_targets else None)
        per_step = step_targets
        if self.kind == "regression" and y.ndim == 1:
            y = y[:, None]
        lengths = m.astype(bool).sum(1)
        if len(lengths) and lengths.min() < 1:
            bad = int(self.ids[np.argmin(lengths)])
            raise DataError(f"dataset file {store.path}: sequence {bad} has no valid step")
        if self.kind == "classification":
            if classes is not None and self.classes is not None:
                self.n_classes = len(classes)
            elif "coords/n_classes" in store.shapes:
                self.n_classes = int(np.asarray(store.read("coords/n_classes", ())).reshape(-1)[0])
            else:
                self.n_classes = int(store.read("fields/y").max()) + 1
            self.n_targets = self.n_classes
        else:
            self.n_classes = None
            self.n_targets = int(y.shape[-1])
        self.window = int(window)
        if window < 0 or window_stride < 1:
            raise DataError(f"sequence windows need window >= 0 and window_stride >= 1, got {window}, {window_stride}")
        if self.window:
            if not per_step:
                raise DataError(f"dataset file {store.path}: data.window needs per-step targets (fields/y of shape "
                                f"(N, T, ...)), got fields/y of shape {y.shape}")
            self.items = [(i, e) for i, n in enumerate(lengths) for e in range(self.window - 1, int(n), window_stride)]
            if not self.items:
                raise DataError(f"dataset file {store.path}: no sequence has {self.window} valid steps for data.window")
            self.length = self.window
            self.per_step = False
        else:
            self.length = int(max_len or T)
            if self.length < 1:
                raise DataError(f"data.max_len must be >= 1, got {max_len}")
            self.items = [(i, -1) for i in range(len(self.ids))]
            self.per_step = per_step
        self.relative_time = relative_time
        self.x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        self.t = torch.from_numpy(np.ascontiguousarray(t, dtype=np.float32))
        self.m = torch.from_numpy(m.astype(bool))
        self.y = torch.from_numpy(np.ascontiguousarray(y)).long() if self.kind == "classification" \
            else torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32))
        self.in_channels = int(x.shape[-1])

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
            raise DataError(f"dataset file {self.store.path} holds class {unknown[0]!r}, which the training data does "
                            f"not have (its classes: {', '.join(training)})")
        lookup = np.asarray([training.index(c) if c in training else -1 for c in own], dtype=np.int64)
        return lookup[np.clip(y, 0, len(own) - 1)]

    def targets(self) -> torch.Tensor:
        """Regression targets of this split's items, ``(N_items, k)`` (to fit the target normalizer)."""
        if self.kind != "regression":
            raise DataError("targets() is for regression sets")
        if self.window:
            return torch.stack([self.y[j, e] for j, e in self.items])
        return self.y[self.m] if self.per_step else self.y


def store_classes(store: StoredDataset) -> list[str] | None:
    """The class names of a converted store (``info.classes`` of its config), in index order; ``None`` for a store
    that names none (the generators' stores)."""
    info = store.config.get("info") if isinstance(store.config, dict) else None
    classes = info.get("classes") if isinstance(info, dict) else None
    return [str(c) for c in classes] if classes else None


def _file_salt(store: StoredDataset) -> int:
    """A number from the file's checksum: two files drop different steps from their sample 0."""
    checksum = str(store.attrs.get("checksum", ""))[:8]
    try:
        return int(checksum, 16)
    except ValueError:
        return 0


def _drop_at_random(keep: np.ndarray, fraction: float, seed: int, salt: int, ids: np.ndarray) -> np.ndarray:
    """``keep`` with ``round(fraction * n)`` of each row's ``n`` kept steps removed at random (at least one stays),
    drawn from (seed, salt, sample id) so a sample loses the same steps in every split and run."""
    out = keep.copy()
    for i, sid in enumerate(ids):
        steps = np.flatnonzero(keep[i])
        n_drop = min(len(steps) - 1, int(round(fraction * len(steps))))
        if n_drop > 0:
            rng = np.random.default_rng([seed, salt, int(sid)])
            out[i, rng.choice(steps, n_drop, replace=False)] = False
    return out


def _compact(keep: np.ndarray, x: np.ndarray, t: np.ndarray, step_y: np.ndarray | None, obs: np.ndarray | None,
             y: np.ndarray):
    """The kept steps of every sequence moved to the front (in order, with their timestamps), the rest padding:
    the mask stays a prefix, as every model reads it. Per-step targets (``step_y``) and ``obs`` move with them."""
    n, T = keep.shape
    x2, t2, m2 = np.zeros_like(x), np.zeros_like(t), np.zeros_like(keep)
    y2 = np.zeros_like(step_y) if step_y is not None else y
    obs2 = np.zeros_like(obs) if obs is not None else None
    for i in range(n):
        idx = np.flatnonzero(keep[i])
        L = len(idx)
        if not L:
            continue
        x2[i, :L], t2[i, :L], t2[i, L:], m2[i, :L] = x[i, idx], t[i, idx], t[i, idx[-1]], True
        if step_y is not None:
            y2[i, :L] = step_y[i, idx]
        if obs2 is not None:
            obs2[i, :L] = obs[i, idx]
    return x2, t2, m2, y2, obs2


def prepare_raw_inputs(x: np.ndarray, mask: np.ndarray, missing: str = "ffill",
                       observed_channels: bool = False) -> np.ndarray:
    """Raw inputs ``x (N, T, C)`` with NaN for a missing value, as a run trained with ``data.missing`` and
    ``data.observed_channels`` saw them: filled (``ffill``; ``mean`` and ``drop`` leave NaN, which the task encodes
    as the training mean: one prediction cannot drop steps) and with the ``C`` observed indicators appended when the
    run had them. ``mask (N, T)``: the sequences' steps. Returns float32 ``(N, T, C)`` or ``(N, T, 2C)``."""
    x = np.asarray(x, dtype=np.float32)
    m = np.asarray(mask, dtype=bool)
    obs = np.isfinite(x)
    if not obs.all():
        x = _fill_missing(np.where(obs, x, 0.0), obs, m, "ffill" if missing == "ffill" else "mean")
    if observed_channels:
        x = np.concatenate([x, (obs & m[..., None]).astype(np.float32)], axis=-1)
    return x


def _fill_missing(x: np.ndarray, obs: np.ndarray, m: np.ndarray, missing: str) -> np.ndarray:
    """``x`` with its unobserved values filled as ``missing`` says (module doc); NaN where the training mean goes."""
    obs = obs & m[..., None]
    if missing == "mean" or missing == "drop":
        return np.where(obs, x, np.nan).astype(np.float32)
    T = x.shape[1]
    steps = np.arange(T)[None, :, None]
    last = np.maximum.accumulate(np.where(obs, steps, -1), axis=1)        # last observed step at or before each
    first = np.argmax(obs, axis=1)[:, None, :]                             # first observed step (N, 1, C)
    src = np.where(last >= 0, last, first)
    filled = np.take_along_axis(x, np.broadcast_to(src, x.shape), axis=1)
    seen = obs.any(axis=1, keepdims=True)
    return np.where(seen, filled, np.nan).astype(np.float32)
