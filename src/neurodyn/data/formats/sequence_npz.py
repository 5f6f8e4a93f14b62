"""Sequences as ``np.savez`` arrays: the one reader of a sequence ``.npz``, into a sequence store
(:func:`neurodyn.data.sequence_store.build_sequences`).

``np.savez(FILE, x=(N, T, C) or (N, T), y=(N,) [, t=(N, T) or (T,)] [, mask=(N, T)] [, classes=(K,)])``: NaN in
``x`` for a missing value; ``mask`` 0 where a sequence has no step (need not be a prefix); ``y`` integer or string
class labels (``classes`` names the indices), float regression targets, or per-step labels ``(N, T)``. Options
(``neurodyn convert FILE.npz key=value``): those of every sequence reader (``max_samples``, ``classes``, ``dt``) and
``per_step`` (a float ``y (N, T)`` is per-step targets rather than ``T`` targets per sequence). Every problem is one
DataError naming the file and the sample. (A point-cloud ``.npz``, ``x (N, P, d)`` with ``y (N, P, c)``, is
:mod:`neurodyn.data.formats.point_cloud`'s.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...errors import DataError
from ..sequence_arrays import Spelling, check_series
from ..sequence_store import COMMON_OPTIONS, Cases, build_sequences, class_list, sequence_options

NPZ_OPTIONS = {**COMMON_OPTIONS, "per_step": False}


def _load(path: Path) -> dict[str, np.ndarray]:
    from .base import read_failed

    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except ValueError as exc:
        if "pickle" in str(exc):
            raise DataError(
                f"{path}: sample 0: an array holds Python objects; save plain numeric (or string) arrays with np.savez"
            ) from None
        raise read_failed(path, exc, ".npz file") from None
    except Exception as exc:  # a damaged zip or member
        raise read_failed(path, exc, ".npz file") from None
    return arrays


def _series(path: Path, arrays: dict[str, np.ndarray], dt: float):
    """``(x (N, T, C) float64, t (N, T), its description, mask (N, T) bool)``, checked as every sequence array is
    (:func:`neurodyn.data.sequence_arrays.check_series`)."""
    x, t, m = check_series(
        arrays["x"], arrays.get("t"), arrays.get("mask"), spelling=Spelling(where=f"{path}: ", x="x")
    )
    n, T, _ = x.shape
    if t is not None:
        return x, t, "the file's t", m
    return x, np.broadcast_to(np.arange(T) * dt, (n, T)), f"step index x dt = {dt:g}", m


def _class_codes(
    path: Path, y: np.ndarray, names: list[str] | None, m: np.ndarray, per_step: bool, given: list[str] | None
) -> tuple[np.ndarray, list[str]]:
    """Integer or string labels ``y`` as indices into the class list (``names``, ``given``, or the labels sorted)."""
    n = len(y)
    raw = y.astype(str) if y.dtype.kind in "US" else y
    if names is not None and np.issubdtype(raw.dtype, np.integer):
        if raw.min() < 0 or raw.max() >= len(names):
            i = int(np.argmax(((raw < 0) | (raw >= len(names))).reshape(n, -1).any(1)))
            raise DataError(
                f"{path}: sample {i}: y holds a class index outside 0..{len(names) - 1} (classes has "
                f"{len(names)} names)"
            )
        labels = np.asarray(names)[raw]
    else:
        labels = raw.astype(str)
    classes = class_list(list(np.unique(labels[m] if per_step else labels)), names, given)
    lookup = {c: k for k, c in enumerate(classes)}
    codes = np.zeros(labels.shape, dtype=np.int64)
    for idx, lab in np.ndenumerate(labels):
        if per_step and not m[idx]:
            continue
        if lab not in lookup:
            raise DataError(
                f"{path}: sample {idx[0]}: label {lab!r} is not one of the classes "
                f"({', '.join(classes)}); name every class with the option classes=[...]"
            )
        codes[idx] = lookup[lab]
    return codes, classes


def _targets(path: Path, arrays: dict[str, np.ndarray], m: np.ndarray, opts: dict[str, Any]):
    """``(y, task, classes, per_step)``: class indices or float targets, checked against ``x``'s ``(N, T)``."""
    y = arrays["y"]
    n, T = m.shape
    per_step = opts["per_step"] or (
        y.ndim == 2 and y.shape == (n, T) and (np.issubdtype(y.dtype, np.integer) or y.dtype.kind in "USb")
    )
    if y.shape[0] != n:
        raise DataError(f"{path}: y has {y.shape[0]} entries for {n} sequences in x")
    if per_step and y.shape[:2] != (n, T):
        raise DataError(f"{path}: per_step=true needs y of shape (N, T) = {(n, T)}, got {y.shape}")
    if y.dtype.kind in "USb" or np.issubdtype(y.dtype, np.integer):
        names = [str(c) for c in arrays["classes"]] if "classes" in arrays else None
        codes, classes = _class_codes(path, y, names, m, per_step, opts["classes"])
        return codes, "classification", classes, per_step
    if not np.issubdtype(y.dtype, np.floating):
        raise DataError(f"{path}: y has dtype {y.dtype}; expected integer or string class labels, or float targets")
    bad = ~np.isfinite(y.reshape(n, -1)).all(1) if not per_step else ~(np.isfinite(y) | ~m).all(1)
    if bad.any():
        raise DataError(f"{path}: sample {int(np.argmax(bad))}: y holds NaN or Inf; every sequence needs a target")
    return y, "regression", None, per_step


def claims(peek) -> bool:
    """An ``.npz`` (or a zip archive holding ``x.npy``); an empty ``.npz`` too, for the reader to say so."""
    if peek.container == "empty":
        return peek.suffix == ".npz"
    return peek.container == "zip" and ("x.npy" in peek.zip_names() or peek.suffix == ".npz")


def read_sequence_npz(path: Path, **given: Any):
    """``np.savez`` arrays (module doc) as a sequence store."""
    sequence_options("sequence-npz", NPZ_OPTIONS, given)  # a bad option is refused before the file is read
    return read_sequence_arrays(_load(path), path, **given)


def read_sequence_arrays(arrays: dict[str, np.ndarray], path: str | Path = "<arrays>", **given: Any):
    """Arrays held in memory, keyed as in an ``.npz`` file (module doc: ``x``, ``y``, optional ``t``, ``mask``,
    ``classes``), as a sequence store, exactly as :func:`read_sequence_npz` reads the file holding them (the
    sequence estimators' data, :mod:`neurodyn.data.memory_store`); ``path`` names them in messages."""
    path = Path(path)
    opts = sequence_options("sequence-npz", NPZ_OPTIONS, given)
    for key in ("x", "y"):
        if key not in arrays:
            raise DataError(
                f"{path}: no array {key!r}; the file holds {sorted(arrays) or 'nothing'} and needs x "
                "(N, T, C) and y (N,) (optional t (N, T), mask (N, T), classes (K,))"
            )
    x, t, stamps, m = _series(path, arrays, opts["dt"])
    n, T, c = x.shape
    y, task, classes, per_step = _targets(path, arrays, m, opts)
    cases = Cases(
        [np.where(m[i][:, None], x[i], np.nan) for i in range(n)],
        [t[i] for i in range(n)],
        [y[i] for i in range(n)],
        [f"{path}: sample {i}" for i in range(n)],
    )
    return build_sequences(
        path,
        "sequence-npz",
        cases,
        task=task,
        classes=classes,
        per_step=per_step,
        channels=[f"x_{j}" for j in range(c)],
        options=opts,
        info={"timestamps": stamps},
    )


__all__ = ["read_sequence_npz", "read_sequence_arrays", "NPZ_OPTIONS", "claims"]
