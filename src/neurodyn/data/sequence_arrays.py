"""The one set of checks of sequence arrays, for a file (``.npz``, :mod:`neurodyn.data.formats.sequence_npz`) and for
arrays handed to the estimators (:mod:`neurodyn.train.estimator`) or to a trained run (``load_run(...).predict``).

Arrays: ``x (N, T, C)`` or ``(N, T)`` real numbers (NaN: a missing value; Inf refused; complex refused, not cast),
``t (N, T)`` or ``(T,)`` timestamps (finite and non-decreasing over each sequence's observed steps), ``mask (N, T)``
0 / 1 (1 on a step of the sequence; at least one per sequence), every sequence with at least one observed value.
Targets: class labels ``(N,)`` of one kind (numbers or strings, never mixed, never NaN), or regression targets
``(N,)`` / ``(N, k)`` of finite real numbers with ``k >= 1``.

Every problem is one :class:`~neurodyn.errors.DataError` sentence naming the array (``X``, ``y``, ... as the caller
spells them, after ``where``: a file's path, or nothing) and, where one sequence is at fault, its index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DataError


@dataclass(frozen=True)
class Spelling:
    """How the caller names things in messages: ``where`` leads every message (``"file.npz: "`` or ``""``), then
    the arrays' names."""

    where: str = ""
    x: str = "X"
    t: str = "t"
    mask: str = "mask"
    y: str = "y"


ARRAYS = Spelling()
"""The estimators' spelling (``X``, ``y``, ``t``, ``mask``, nothing before them)."""


def as_array(a: Any, name: str, where: str = "") -> np.ndarray:
    """``a`` (a numpy array, a tensor, a list) as a numpy array; one DataError for a ragged list (sequences of
    different lengths), which numpy would otherwise keep as Python objects."""
    if hasattr(a, "detach") and hasattr(a, "cpu"):  # a torch tensor (no torch import here)
        a = a.detach().cpu().numpy()
    try:
        out = np.asarray(a)
    except ValueError:  # numpy >= 1.24 refuses a ragged nested list
        out = None
    if out is None or (out.dtype == object and out.ndim >= 1 and _ragged(out)):
        raise DataError(
            f"{where}{name} is ragged (its sequences have different lengths); pad them to one length with "
            f"NaN (a missing value) and pass mask (N, T) with 0 after each sequence's end"
        )
    return out


def _ragged(a: np.ndarray) -> bool:
    return any(isinstance(v, (list, tuple, np.ndarray)) for v in a.ravel()[:1000])


def _real_numbers(a: np.ndarray, name: str, where: str, shape: str) -> None:
    """One DataError unless ``a`` holds real numbers (or booleans)."""
    if np.iscomplexobj(a):
        raise DataError(
            f"{where}{name} holds complex numbers; expected real numbers of shape {shape} (pass the real "
            "and imaginary parts as two channels)"
        )
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
        raise DataError(f"{where}{name} has shape {a.shape} and dtype {a.dtype}; expected numbers of shape {shape}")


def check_series(
    x: Any, t: Any = None, mask: Any = None, *, channels: int | None = None, spelling: Spelling = ARRAYS
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """``(x float64 (N, T, C), t float64 (N, T) or None, mask bool (N, T))`` of checked sequence arrays (module
    doc); ``channels``: the number ``x`` must have (a fitted model's)."""
    s = spelling
    x = as_array(x, s.x, s.where)
    if x.ndim == 2:
        x = x[..., None]
    _real_numbers(x, s.x, s.where, "(N, T, C) (sequences, steps, channels) or (N, T) for one channel")
    if x.ndim != 3 or 0 in x.shape:
        raise DataError(
            f"{s.where}{s.x} has shape {x.shape}; expected numbers of shape (N, T, C) (sequences, steps, "
            "channels) or (N, T) for one channel, with N, T, C >= 1"
        )
    x = x.astype(np.float64)
    n, T, c = x.shape
    if channels is not None and c != channels:
        raise DataError(f"{s.where}{s.x} has {c} channels (shape {x.shape}); the model was fitted on {channels}")
    inf = np.isinf(x).reshape(n, -1).any(1)
    if inf.any():
        raise DataError(
            f"{s.where}{s.x} holds Inf in sequence {int(np.argmax(inf))}; expected finite values (NaN for "
            "a missing one)"
        )
    m = np.ones((n, T), dtype=bool) if mask is None else _mask(mask, n, T, s)
    seen = (np.isfinite(x).any(2) & m).any(1)
    if not seen.all():
        raise DataError(
            f"{s.where}{s.x}: sequence {int(np.argmin(seen))} holds no observed value (every value is "
            "missing); remove it"
        )
    return x, (None if t is None else _times(t, x, m, s)), m


def _mask(mask: Any, n: int, T: int, s: Spelling) -> np.ndarray:
    m = as_array(mask, s.mask, s.where)
    if m.shape != (n, T):
        raise DataError(f"{s.where}{s.mask} has shape {m.shape}; expected 0/1 values of shape (N, T) = {(n, T)}")
    if np.iscomplexobj(m) or not (np.issubdtype(m.dtype, np.number) or m.dtype == bool) or not np.isin(m, (0, 1)).all():
        bad = ~np.isin(m, (0, 1)) if not np.iscomplexobj(m) and m.dtype != object else np.ones_like(m, dtype=bool)
        raise DataError(
            f"{s.where}{s.mask}: sequence {int(np.argmax(bad.any(1)))} holds values other than 0 and 1; "
            "expected 1 on a step of the sequence and 0 after its end"
        )
    m = m.astype(bool)
    if not m.any(1).all():
        raise DataError(f"{s.where}{s.mask}: sequence {int(np.argmin(m.any(1)))} has no step (its mask is all 0)")
    return m


def _times(t: Any, x: np.ndarray, m: np.ndarray, s: Spelling) -> np.ndarray:
    n, T, _ = x.shape
    t = as_array(t, s.t, s.where)
    _real_numbers(t, s.t, s.where, f"(N, T) = {(n, T)} or (T,) = {(T,)}")
    t = t.astype(np.float64)
    if t.shape == (T,):
        t = np.repeat(t[None], n, axis=0)
    if t.shape != (n, T):
        raise DataError(f"{s.where}{s.t} has shape {t.shape}; expected (N, T) = {(n, T)} or (T,) = {(T,)}")
    steps = m & np.isfinite(x).any(2)  # the steps that are kept: a step with no observed value is no step
    bad = (steps & ~np.isfinite(t)).any(1)
    if bad.any():
        i = int(np.argmax(bad))
        j = int(np.argmax(steps[i] & ~np.isfinite(t[i])))
        raise DataError(f"{s.where}{s.t}: sequence {i} has no finite timestamp at step {j + 1}")
    for i in range(n):
        ti = t[i, steps[i]]
        drop = np.diff(ti) < 0
        if drop.any():
            j = int(np.argmax(drop))
            raise DataError(
                f"{s.where}{s.t}: sequence {i} has timestamps that decrease ({ti[j]:g} then "
                f"{ti[j + 1]:g}); expected them in time order"
            )
    return t


def check_labels(y: Any, n: int, spelling: Spelling = ARRAYS) -> np.ndarray:
    """Class labels ``y (N,)`` (module doc), checked against ``n`` sequences: numbers or strings of one kind."""
    s = spelling
    y = as_array(y, s.y, s.where)
    if y.ndim != 1 or len(y) != n:
        raise DataError(f"{s.where}{s.y} has shape {y.shape}; expected one label per sequence, shape (N,) = ({n},)")
    if np.iscomplexobj(y):
        raise DataError(f"{s.where}{s.y} holds complex numbers; expected class labels (numbers or strings)")
    if y.dtype == object:
        kinds = sorted({_label_kind(v) for v in y})
        if "other" in kinds or len(kinds) > 1:
            shown = ", ".join(sorted({type(v).__name__ for v in y}))
            raise DataError(
                f"{s.where}{s.y} mixes label types ({shown}); give labels of one kind: all numbers or all strings"
            )
        y = y.astype(str) if kinds == ["text"] else y.astype(np.float64)
    if np.issubdtype(y.dtype, np.floating):
        bad = ~np.isfinite(y)
        if bad.any():
            raise DataError(
                f"{s.where}{s.y}: sequence {int(np.argmax(bad))} has the label {y[np.argmax(bad)]}; a "
                "class label is a finite number or a string"
            )
    elif not (np.issubdtype(y.dtype, np.number) or y.dtype == bool or y.dtype.kind in "US"):
        raise DataError(f"{s.where}{s.y} has dtype {y.dtype}; expected class labels (numbers or strings)")
    return y


def _label_kind(v: Any) -> str:
    if isinstance(v, (str, np.str_, bytes)):
        return "text"
    if isinstance(v, (bool, int, float, np.number, np.bool_)) and not isinstance(v, complex):
        return "number"
    return "other"


def label_kind(labels: np.ndarray) -> str:
    """``"text"`` for string labels, ``"number"`` for numeric (or boolean) ones."""
    return "text" if labels.dtype.kind in "USO" else "number"


def check_targets(y: Any, n: int, spelling: Spelling = ARRAYS) -> np.ndarray:
    """Regression targets ``y (N,)`` or ``(N, k)``, ``k >= 1``, finite real numbers, as float64."""
    s = spelling
    y = as_array(y, s.y, s.where)
    _real_numbers(y, s.y, s.where, f"(N,) or (N, k) with N = {n}")
    if y.ndim not in (1, 2) or len(y) != n or (y.ndim == 2 and y.shape[1] == 0):
        raise DataError(
            f"{s.where}{s.y} has shape {y.shape}; expected numbers of shape (N,) or (N, k) with N = {n} and k >= 1"
        )
    bad = ~np.isfinite(y.reshape(n, -1).astype(np.float64)).all(1)
    if bad.any():
        raise DataError(
            f"{s.where}{s.y}: sequence {int(np.argmax(bad))} has a NaN or Inf target; every sequence needs "
            "a finite target"
        )
    return y.astype(np.float64)


__all__ = ["ARRAYS", "Spelling", "as_array", "check_labels", "check_series", "check_targets", "label_kind"]
