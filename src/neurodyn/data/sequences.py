"""Ragged, irregularly sampled sequences: the store layout and the torch Dataset over it.

Store layout written by the sequence generators (``event_digits``, ``activity``, ``bearing``)::

    fields/x     (N, T_max, C) float32   observations, zero after the end of a sequence
    fields/t     (N, T_max)    float32   timestamps (non-decreasing over the valid steps)
    fields/mask  (N, T_max)    uint8     1 for real steps; each sequence is a prefix of T_max
    fields/y     (N,) int64              class per sequence, or (N, k) float32 regression targets,
                                          or (N, T_max) int64 / (N, T_max, k) float32 per step
    params/...   per-sequence extras (condition, source index, ...)
    coords/n_classes  () int             for classification sets

``SequenceDataset`` items are ``{"x": (T, C), "t": (T,), "mask": (T,) bool, "y": ..., "index": ()}``
with every sequence padded (or cut) to one length ``T``. With ``window > 0`` a dataset of per-step
targets yields windows of ``window`` consecutive valid steps whose target is the last step's.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from ..errors import DataError
from .store import StoredDataset


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
                 window_stride: int = 1, relative_time: bool = True):
        for key in ("fields/x", "fields/t", "fields/mask", "fields/y"):
            if key not in store.shapes:
                raise DataError(f"dataset file {store.path} is not a sequence dataset: it lacks {key!r} "
                                f"(it has {sorted(store.shapes)})")
        self.store = store
        self.ids = np.asarray(ids, dtype=np.int64)
        order = np.argsort(self.ids)
        inv = np.argsort(order)
        read = lambda k: store.read(k, self.ids[order])[inv] if len(self.ids) else store.read(k, slice(0, 0))
        x, t, m, y = (read(k) for k in ("fields/x", "fields/t", "fields/mask", "fields/y"))
        check_sequence_arrays({"fields/x": x, "fields/t": t, "fields/mask": m, "fields/y": y}, str(store.path))
        T = x.shape[1]
        if not np.isfinite(x[m.astype(bool)]).all() or not np.isfinite(t[m.astype(bool)]).all():
            raise DataError(f"dataset file {store.path}: NaN or Inf in the valid steps of fields/x or fields/t")
        self.kind = "classification" if np.issubdtype(y.dtype, np.integer) else "regression"
        per_step = y.ndim >= 2 and y.shape[1] == T and (self.kind == "classification" or y.ndim == 3)
        if self.kind == "regression" and y.ndim == 1:
            y = y[:, None]
        lengths = m.astype(bool).sum(1)
        if len(lengths) and lengths.min() < 1:
            bad = int(self.ids[np.argmin(lengths)])
            raise DataError(f"dataset file {store.path}: sequence {bad} has no valid step")
        if self.kind == "classification":
            if "coords/n_classes" in store.shapes:
                self.n_classes = int(store.read("coords/n_classes", ()))
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
        """Every valid observation of this split, ``(N_valid, C)`` (to fit the input normalizer)."""
        return self.x[self.m]

    def targets(self) -> torch.Tensor:
        """Regression targets of this split's items, ``(N_items, k)`` (to fit the target normalizer)."""
        if self.kind != "regression":
            raise DataError("targets() is for regression sets")
        if self.window:
            return torch.stack([self.y[j, e] for j, e in self.items])
        return self.y[self.m] if self.per_step else self.y
