"""Ragged, irregularly sampled sequences: the store layout, how a reader's cases become it, and the torch Dataset
over it. Every sequence store is made here or by the sequence generators; the readers of files only parse.

Store layout written by the sequence generators (``event_digits``, ``activity``, ``bearing``) and by
:func:`build_sequences` (every sequence reader of :mod:`neurodyn.data.formats`: ``ts``, ``long_table``,
``sequence_npz``, ``person_activity``, ``mnist``, ``bearings``)::

    fields/x     (N, T_max, C) float32   observations, zero after the end of a sequence
    fields/t     (N, T_max)    float32   timestamps (non-decreasing over the valid steps)
    fields/mask  (N, T_max)    uint8     1 for real steps; each sequence is a prefix of T_max
    fields/y     (N,) int64              class per sequence, or (N, k) float32 regression targets,
                                          or (N, T_max) int64 / (N, T_max, k) float32 per step
    fields/observed (N, T_max, C) uint8  optional (converted files with missing values): 1 where observed
    params/...   per-sequence extras (length, condition, source index, ...)
    coords/n_classes  () int             for classification sets

Stores converted from a user's files (``neurodyn convert FILE``) also name their classes in the config
(``info.classes``).

Writing (:func:`build_sequences`): a reader hands its ragged :class:`Cases` (NaN for a missing value); a step at
which no channel is observed is not a step (its timestamp leaves with it); timestamps must be finite and in time
order, and those beyond ``2^23`` are shifted to start at 0 per sequence (float32). The options every reader takes
(:data:`COMMON_OPTIONS`, checked by :func:`sequence_options`): ``max_samples``, ``classes`` (the class names in
index order), ``dt`` (time between steps where a file gives no timestamps).

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

Long sequences at a CPU's cost (``max_steps``): for per-sequence targets (a class or a regression value of the
whole sequence) a sequence store whose longest sequence ``T_max`` exceeds ``max_steps`` steps is average-pooled in
time by the integer factor ``k = ceil(T_max / max_steps)``, after ``missing=drop`` and ``drop_steps`` removed
their steps. Pooled step ``j`` of a sequence is the masked mean of the window ``[jk, (j+1)k)``::

    x'_j = mean over valid i in [jk, (j+1)k) of x_i      (per channel: over the steps where it was observed)
    t'_j = mean over valid i in [jk, (j+1)k) of t_i      mask'_j = any valid i in [jk, (j+1)k)

so a sequence of ``L`` valid steps becomes ``ceil(L / k)``. ``max_steps``: ``"auto"`` pools to at most
:data:`AUTO_MAX_STEPS` steps for per-sequence targets and never for per-step ones (pooling would misalign their
labels, so an integer limit there is a ConfigError); an integer ``>= 1``: that limit; ``0`` or ``None``: never.
``k`` is computed from ``pool_from`` (the training file's ``T_max``, which :mod:`neurodyn.data.assembly` passes to
every split and test file of a run, so they pool alike), else from this file's.

``SequenceDataset`` items are ``{"x": (T, C), "t": (T,), "mask": (T,) bool, "y": ..., "index": ()}``
with every sequence padded (or cut) to one length ``T``. With ``window > 0`` a dataset of per-step
targets yields windows of ``window`` consecutive valid steps whose target is the last step's.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from ..errors import ConfigError, DataError
from .store import StoredDataset, check_in_range

MISSING = ("ffill", "mean", "drop")
AUTO_MAX_STEPS = 256  # data.max_steps "auto": per-sequence targets are pooled to at most this many steps


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


def take_sequences(data, ids: np.ndarray, length: int) -> dict[str, np.ndarray]:
    """Sequences ``ids`` of a sequence store ``data`` (a :class:`~neurodyn.data.formats.base.PublicDataset`) padded
    or cut to ``length`` steps: ``fields/x, t, mask, y`` (per-step ``y`` too; ``t`` repeats the last timestamp
    after the end) and ``params/<name>``, in the order of ``ids``."""
    ids = np.asarray(ids, dtype=np.int64)
    lo, hi = int(ids.min()), int(ids.max()) + 1
    rows = ids - lo
    part = {k: v[rows] for k, v in data.chunk(lo, hi).items()}
    T = part["fields/x"].shape[1]
    n = min(T, length)
    out = {}
    for key in ("fields/x", "fields/t", "fields/mask", "fields/y"):
        a = part[key]
        if key == "fields/y" and (a.ndim < 2 or a.shape[1] != T):
            out[key] = a
            continue
        pad = np.zeros((len(ids), length, *a.shape[2:]), dtype=a.dtype)
        pad[:, :n] = a[:, :n]
        if key == "fields/t" and length > n:
            pad[:, n:] = a[:, n - 1:n]
        out[key] = pad
    out.update({k: v for k, v in part.items() if k.startswith("params/")})
    return out


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
    timestamps to start at 0. ``max_steps`` and ``pool_from``: time pooling of long sequences (module doc);
    ``self.pool`` is the factor ``k`` applied (1: none).
    """

    def __init__(self, store: StoredDataset, ids: np.ndarray, max_len: int | None = None, window: int = 0,
                 window_stride: int = 1, relative_time: bool = True, missing: str = "ffill",
                 observed_channels: bool = False, drop_steps: float = 0.0, drop_seed: int = 0,
                 classes: Sequence[str] | None = None, max_steps: int | str | None = 0,
                 pool_from: int | None = None):
        _check_options(store, missing, drop_steps)
        self.store = store
        self.ids = np.asarray(ids, dtype=np.int64)
        x, t, m, y, obs = _read_split(store, self.ids)
        self.kind = "classification" if np.issubdtype(y.dtype, np.integer) else "regression"
        per_step = y.ndim >= 2 and y.shape[1] == x.shape[1] and (self.kind == "classification" or y.ndim == 3)
        keep = _kept_steps(store, self.ids, m, obs, missing, float(drop_steps), int(drop_seed))
        if not np.array_equal(keep, m):
            x, t, m, y, obs = _compact(keep, x, t, y if per_step else None, obs, y)
        self.pool = pool_factor(max_steps, int(pool_from or x.shape[1]), per_step)
        if self.pool > 1:
            x, t, m, obs = pool_in_time(x, t, m, obs, self.pool)
        x, self.measured = _model_inputs(x, obs, m, missing, observed_channels)
        self.missing, self.observed_channels, self.drop_steps = missing, bool(observed_channels), float(drop_steps)
        self.classes = store_classes(store)
        if classes is not None and self.kind == "classification":
            y = self._to_training_classes(y, list(classes), m if per_step else None)
        if self.kind == "regression" and y.ndim == 1:
            y = y[:, None]
        lengths = m.sum(1)
        if len(lengths) and lengths.min() < 1:
            raise DataError(f"dataset file {store.path}: sequence {int(self.ids[np.argmin(lengths)])} has no valid "
                            "step")
        self.n_classes = self._count_classes(classes) if self.kind == "classification" else None
        self.n_targets = self.n_classes if self.kind == "classification" else int(y.shape[-1])
        self._set_items(lengths, per_step, y, int(window), window_stride, max_len, x.shape[1])
        self.relative_time = relative_time
        self.x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        self.t = torch.from_numpy(np.ascontiguousarray(t, dtype=np.float32))
        self.m = torch.from_numpy(m.astype(bool))
        self.y = torch.from_numpy(np.ascontiguousarray(y)).long() if self.kind == "classification" \
            else torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32))
        self.in_channels = int(x.shape[-1])

    def _count_classes(self, classes: Sequence[str] | None) -> int:
        """The training data's class count, else the store's ``coords/n_classes``, else the largest label + 1."""
        if classes is not None and self.classes is not None:
            return len(classes)
        if "coords/n_classes" in self.store.shapes:
            return int(np.asarray(self.store.read("coords/n_classes", ())).reshape(-1)[0])
        return int(self.store.read("fields/y").max()) + 1

    def _set_items(self, lengths: np.ndarray, per_step: bool, y: np.ndarray, window: int, window_stride: int,
                   max_len: int | None, T: int) -> None:
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
            raise DataError(f"dataset file {path}: data.window needs per-step targets (fields/y of shape "
                            f"(N, T, ...)), got fields/y of shape {y.shape}")
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


def _check_options(store: StoredDataset, missing: str, drop_steps) -> None:
    for key in ("fields/x", "fields/t", "fields/mask", "fields/y"):
        if key not in store.shapes:
            raise DataError(f"dataset file {store.path} is not a sequence dataset: it lacks {key!r} "
                            f"(it has {sorted(store.shapes)})")
    if missing not in MISSING:
        raise ConfigError(f"data.missing must be one of {', '.join(MISSING)}, got {missing!r}")
    if isinstance(drop_steps, bool) or not isinstance(drop_steps, (int, float)) or not 0 <= drop_steps < 1:
        raise ConfigError(f"data.drop_steps is the fraction of each sequence's steps dropped, in [0, 1); got "
                          f"{drop_steps!r}")


def pool_factor(max_steps: Any, t_max: int, per_step: bool) -> int:
    """The time-pooling factor ``k = ceil(t_max / limit)`` of ``data.max_steps`` (module doc), 1 for no pooling;
    one ConfigError for a value that is not ``auto``, ``0`` / ``None`` or an integer ``>= 1``, and for an integer
    limit on per-step targets."""
    if max_steps is None or max_steps == "auto":
        limit = None if max_steps is None or per_step else AUTO_MAX_STEPS
    elif isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 0:
        raise ConfigError(f"data.max_steps must be 'auto', 0 (never pool) or a whole number >= 1 (the most time "
                          f"steps a sequence keeps; longer ones are average-pooled in time); got {max_steps!r}")
    else:
        limit = int(max_steps) or None
        if limit and per_step:
            raise ConfigError(f"data.max_steps={limit}: this data has per-step targets, which pooling steps together "
                              "would misalign; set data.max_steps=0 (or auto, which never pools them), or use "
                              "data.window to cut long sequences")
    if not limit or t_max <= limit:
        return 1
    return -(-int(t_max) // limit)


def pool_in_time(x: np.ndarray, t: np.ndarray, m: np.ndarray, obs: np.ndarray | None, k: int):
    """Average-pool sequences in time by ``k`` (module doc): ``x (N, T, C)``, ``t (N, T)``, ``m (N, T)`` bool (a
    prefix per row), ``obs (N, T, C)`` bool or None -> ``x' (N, T', C)`` float32, ``t' (N, T')``, ``m' (N, T')``,
    ``obs' (N, T', C)`` or None with ``T' = ceil(T / k)``. ``x'_j`` is the mean of ``x_i`` over the valid (and, with
    ``obs``, observed) ``i`` in ``[jk, (j+1)k)`` (0 and unobserved where there is none); ``t'_j`` the mean of their
    timestamps (after the end: the last valid one, as padding repeats it); ``m'_j`` whether any step was valid."""
    n, T, C = x.shape
    Tp = -(-T // k)
    pad = Tp * k - T

    def windows(a: np.ndarray, fill) -> np.ndarray:
        a = np.concatenate([a, np.full((n, pad, *a.shape[2:]), fill, dtype=a.dtype)], axis=1) if pad else a
        return a.reshape(n, Tp, k, *a.shape[2:])

    mw = windows(m, False)
    w = windows(obs & m[..., None], False) if obs is not None else np.broadcast_to(mw[..., None], (n, Tp, k, C))
    count = w.sum(2)
    xp = np.where(w, windows(x, 0), 0).sum(2, dtype=np.float64) / np.maximum(count, 1)  # one float32 temporary
    steps = mw.sum(2)
    tp = np.where(mw, windows(t, 0), 0).sum(2, dtype=np.float64) / np.maximum(steps, 1)
    mp = steps > 0
    last = np.maximum(mp.sum(1) - 1, 0)
    tp = np.where(mp, tp, tp[np.arange(n), last][:, None])
    return (xp.astype(np.float32), tp.astype(t.dtype), mp, (count > 0) if obs is not None else None)


def _read_split(store: StoredDataset, ids: np.ndarray):
    """``x, t, mask (bool), y, observed (bool or None)`` of the samples ``ids`` (in that order), checked."""
    order = np.argsort(ids)
    inv = np.argsort(order)
    read = lambda k: store.read(k, ids[order])[inv] if len(ids) else store.read(k, slice(0, 0))
    x, t, m, y = (read(k) for k in ("fields/x", "fields/t", "fields/mask", "fields/y"))
    check_sequence_arrays({"fields/x": x, "fields/t": t, "fields/mask": m, "fields/y": y}, str(store.path))
    obs = read("fields/observed").astype(bool) if "fields/observed" in store.shapes else None
    if obs is not None and obs.shape != x.shape:
        raise DataError(f"dataset file {store.path}: fields/observed {obs.shape} must have the shape of fields/x "
                        f"{x.shape}")
    m = m.astype(bool)
    values = x if obs is None else np.where(obs, x, 0.0)
    if not np.isfinite(values[m]).all() or not np.isfinite(t[m]).all():
        raise DataError(f"dataset file {store.path}: NaN or Inf in the valid steps of fields/x or fields/t")
    return x, t, m, y, obs


def _kept_steps(store: StoredDataset, ids: np.ndarray, m: np.ndarray, obs: np.ndarray | None, missing: str,
                drop_steps: float, drop_seed: int) -> np.ndarray:
    """The steps kept ``(N, T)`` bool: the mask, less the steps with a missing channel (``missing=drop``) and the
    ``drop_steps`` fraction drawn at random."""
    keep = m.copy()
    if obs is not None and missing == "drop":
        keep &= obs.all(-1)
        emptied = m.any(1) & ~keep.any(1)
        if emptied.any():
            raise DataError(f"dataset file {store.path}: sequence {int(ids[np.argmax(emptied)])} has no step "
                            "at which every channel is observed, so data.missing=drop leaves nothing of it; use "
                            "data.missing=ffill or mean")
    if drop_steps:
        keep = _drop_at_random(keep, drop_steps, drop_seed, _file_salt(store), ids)
    return keep


def _model_inputs(x: np.ndarray, obs: np.ndarray | None, m: np.ndarray, missing: str, observed_channels: bool):
    """``x`` filled as ``missing`` says (with the observed indicators appended when ``observed_channels``), and the
    ``(N, T, C')`` bool tensor of the measured values (``None`` when every value was measured)."""
    measured = None
    if obs is not None:
        x = _fill_missing(x.astype(np.float32), obs, m, missing)
        measured = obs
    if observed_channels:
        ind = obs if obs is not None else np.ones(x.shape, dtype=bool)
        x = np.concatenate([x, (ind & m[..., None]).astype(np.float32)], axis=-1)
        if measured is not None:
            measured = np.concatenate([measured, np.ones_like(measured)], axis=-1)
    return x, (None if measured is None else torch.from_numpy(measured & m[..., None]))


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


# --------------------------------------------------------------------------------------------------
# Writing: a reader's ragged cases -> the padded store arrays (every sequence reader ends here)
# --------------------------------------------------------------------------------------------------

COMMON_OPTIONS = {"max_samples": 0, "classes": None, "dt": 1.0}
"""Options every sequence reader takes (module doc of :mod:`neurodyn.data.formats.ts` and its siblings)."""
TIME_PRECISION = 2.0 ** 23  # float32 keeps steps of 1 only below this: larger timestamps are shifted per sequence


def sequence_options(reader: str, defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``given`` reader options over ``defaults`` (a superset of :data:`COMMON_OPTIONS`), checked: an unknown name
    or a bad ``max_samples`` / ``dt`` / ``classes`` / ``per_step`` is one ConfigError."""
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ConfigError(f"reader {reader!r} has no option(s) {', '.join(unknown)}; its options are: "
                          f"{', '.join(sorted(defaults))}")
    opts = {**defaults, **given}
    m = opts["max_samples"]
    if isinstance(m, bool) or not isinstance(m, int) or m < 0:
        raise ConfigError(f"option max_samples must be an int >= 0 (0: all samples), got {m!r}")
    dt = opts["dt"]
    if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not dt > 0:
        raise ConfigError(f"option dt (time between steps where the file has no timestamps) must be > 0, got {dt!r}")
    opts["dt"] = float(dt)
    if opts["classes"] is not None:
        if isinstance(opts["classes"], str) or not isinstance(opts["classes"], (list, tuple)) or not opts["classes"]:
            raise ConfigError(f"option classes must be a list of class names, e.g. classes=[walk, run], got "
                              f"{opts['classes']!r}")
        opts["classes"] = [str(c) for c in opts["classes"]]
        if len(set(opts["classes"])) != len(opts["classes"]):
            raise ConfigError(f"option classes lists a name twice: {opts['classes']}")
    if "per_step" in opts and not isinstance(opts["per_step"], bool):
        raise ConfigError(f"option per_step must be true or false, got {opts['per_step']!r}")
    return opts


def _natural_key(name: str):
    try:
        return (0, float(name), "")
    except ValueError:
        return (1, 0.0, name)


def class_list(found: Sequence[str], declared: Sequence[str] | None, given: Sequence[str] | None) -> list[str]:
    """The class names in index order: the ``classes`` option, else those the file declares, else the labels found
    sorted (numbers numerically)."""
    if given:
        return list(given)
    if declared:
        return list(declared)
    return sorted(set(found), key=_natural_key)


def label_index(label: str, classes: list[str], where: str, what: str) -> int:
    """The index of ``label`` in ``classes``; one DataError naming ``where`` for a label outside them."""
    try:
        return classes.index(label)
    except ValueError:
        raise DataError(f"{where}: {what} {label!r} is not one of the classes ({', '.join(classes)}); name every "
                        "class with the option classes=[...]") from None


@dataclass
class Cases:
    """Ragged sequences as a reader found them: ``xs[i] (n_i, C)`` (NaN: missing) at times ``ts[i] (n_i,)`` with
    targets ``ys[i]`` (a class index, a float or a float vector, or per step an ``(n_i,)`` array); ``where[i]``
    starts the message of a problem with sequence ``i`` (file and line)."""

    xs: list[np.ndarray]
    ts: list[np.ndarray]
    ys: list[Any]
    where: list[str]


def _clean_case(x, t, y, where: str, per_step: bool) -> tuple[np.ndarray, np.ndarray, Any, bool]:
    """One case without its all-missing steps (a step at which no channel is observed is not a step), its
    timestamps checked (finite, in time order) and shifted to start at 0 when float32 would round them."""
    x, t = np.asarray(x, dtype=np.float64), np.asarray(t, dtype=np.float64)
    check_in_range(x, np.dtype(np.float32), f"{where}: x", offset=None)
    rows = np.isfinite(x).any(axis=1)
    if not rows.any():
        raise DataError(f"{where} holds no observed value (every value is missing); remove it")
    bad_t = rows & ~np.isfinite(t)
    if bad_t.any():
        raise DataError(f"{where} has no finite timestamp at step {int(np.argmax(bad_t)) + 1}")
    x, t = x[rows], t[rows]
    if np.any(np.diff(t) < 0):
        j = int(np.argmax(np.diff(t) < 0)) + 1
        raise DataError(f"{where} has timestamps that decrease at step {j + 1} ({t[j - 1]:g} then {t[j]:g}); "
                        "expected them in time order")
    shifted = bool(np.abs(t).max() >= TIME_PRECISION)
    return x, (t - t[0] if shifted else t), (np.asarray(y)[rows] if per_step else y), shifted


def _pad_cases(xs: list[np.ndarray], ts: list[np.ndarray]) -> dict[str, np.ndarray]:
    """``x (N, T, C)`` (0 where missing or after the end), ``observed (N, T, C)``, ``t (N, T)`` (the last
    timestamp repeated after the end), ``mask (N, T)``, ``lengths (N,)``; ``T`` the longest case."""
    n, c = len(xs), xs[0].shape[1]
    lengths = np.asarray([len(x) for x in xs], dtype=np.int64)
    T = int(lengths.max())
    out = {"x": np.zeros((n, T, c), dtype=np.float32), "observed": np.zeros((n, T, c), dtype=np.uint8),
           "t": np.zeros((n, T), dtype=np.float32), "mask": np.zeros((n, T), dtype=np.uint8), "lengths": lengths}
    for i, (xi, ti) in enumerate(zip(xs, ts)):
        L, ok = len(xi), np.isfinite(xi)
        out["x"][i, :L] = np.where(ok, xi, 0.0)
        out["observed"][i, :L] = ok
        out["t"][i, :L], out["t"][i, L:] = ti, ti[-1]
        out["mask"][i, :L] = 1
    return out


def _pad_targets(ys: list[Any], task: str, per_step: bool, T: int) -> np.ndarray:
    dtype = np.int64 if task == "classification" else np.float32
    if not per_step:
        return np.asarray(ys, dtype=dtype)
    y = np.zeros((len(ys), T, *np.shape(ys[0])[1:]), dtype=dtype)
    for i, yi in enumerate(ys):
        y[i, :len(yi)] = yi
    return y


def build_sequences(path: Path, fmt: str, cases: Cases, *, task: str, classes: list[str] | None, per_step: bool,
                    channels: list[str], options: dict[str, Any], info: dict[str, Any],
                    params: dict[str, np.ndarray] | None = None, files: list[Path] | None = None):
    """``cases`` as a :class:`~neurodyn.data.formats.base.PublicDataset` in the store layout of the module doc:
    ``fields/x, t, mask, y`` (``observed`` when a value is missing inside a sequence), ``params/length`` (and
    ``params``, one value per case), ``coords/n_classes`` and ``info.classes`` for classes."""
    from .formats.base import ArraySource, PublicDataset

    n = options.get("max_samples") or len(cases.xs)
    cleaned = [_clean_case(x, t, y, w, per_step) for x, t, y, w in
               zip(cases.xs[:n], cases.ts[:n], cases.ys[:n], cases.where[:n])]
    xs, ts, ys, shifted = (list(v) for v in zip(*cleaned))
    arrays = _pad_cases(xs, ts)
    arrays["y"] = _pad_targets(ys, task, per_step, arrays["x"].shape[1])
    missing = int(((arrays["observed"] == 0) & (arrays["mask"][..., None] == 1)).sum())
    names = ("x", "t", "mask", "y") + (("observed",) if missing else ())
    fields = {k: ArraySource(tuple(arrays[k].shape), f"{path}: {k}", lambda lo, hi, a=arrays[k]: a[lo:hi],
                             dtype=arrays[k].dtype) for k in names}
    spacing = [np.diff(ti) for ti in ts if len(ti) > 1]
    lengths = arrays["lengths"]
    info = {**info, "task": task, "per_step": per_step, "channels": channels, "n_sequences": len(xs),
            "steps": [int(lengths.min()), int(lengths.max())], "missing_values": missing,
            "irregular": bool(spacing) and not all(np.allclose(d, spacing[0][0]) for d in spacing)}
    if classes is not None:
        info["classes"] = list(classes)
    if any(shifted):
        info["time_shifted"] = "timestamps beyond 2^23 are stored from each sequence's first one (float32)"
    extra = {k: np.asarray(v)[:n] for k, v in (params or {}).items()}
    return PublicDataset(format=fmt, kind=task, path=path, files=files or [path], fields=fields,
                         params={"length": lengths.astype(np.float32), **extra},
                         coords={"n_classes": np.asarray(len(classes))} if classes is not None else {},
                         inputs=("x", "t", "mask") + (("observed",) if missing else ()), targets=("y",), info=info,
                         options={k: list(v) if isinstance(v, tuple) else v for k, v in options.items()})
