"""The sequence store: its layout, and how a reader's ragged cases become it (every sequence store is made here or by
the sequence generators; the readers of files only parse, and this module imports nothing from them).

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
index order), ``dt`` (time between steps where a file gives no timestamps). A generator pads its own sequences with
:func:`pad_sequences`, and takes a converted store's rows with :func:`take_sequences`.

Reading the store: :mod:`neurodyn.data.sequence_dataset` (``SequenceDataset``), with its missing values
(:mod:`neurodyn.data.sequence_missing`) and time pooling (:mod:`neurodyn.data.sequence_pooling`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError
from .public_dataset import ArraySource, PublicDataset
from .store import check_in_range


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
    """Sequences ``ids`` of a sequence store ``data`` (a :class:`~neurodyn.data.public_dataset.PublicDataset`) padded
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
            pad[:, n:] = a[:, n - 1 : n]
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


# --------------------------------------------------------------------------------------------------
# Writing: a reader's ragged cases -> the padded store arrays (every sequence reader ends here)
# --------------------------------------------------------------------------------------------------

COMMON_OPTIONS = {"max_samples": 0, "classes": None, "dt": 1.0}
"""Options every sequence reader takes (module doc of :mod:`neurodyn.data.formats.ts` and its siblings)."""
TIME_PRECISION = 2.0**23  # float32 keeps steps of 1 only below this: larger timestamps are shifted per sequence


def sequence_options(reader: str, defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``given`` reader options over ``defaults`` (a superset of :data:`COMMON_OPTIONS`), checked: an unknown name
    or a bad ``max_samples`` / ``dt`` / ``classes`` / ``per_step`` is one ConfigError."""
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ConfigError(
            f"reader {reader!r} has no option(s) {', '.join(unknown)}; its options are: {', '.join(sorted(defaults))}"
        )
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
            raise ConfigError(
                f"option classes must be a list of class names, e.g. classes=[walk, run], got {opts['classes']!r}"
            )
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
        raise DataError(
            f"{where}: {what} {label!r} is not one of the classes ({', '.join(classes)}); name every "
            "class with the option classes=[...]"
        ) from None


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
        raise DataError(
            f"{where} has timestamps that decrease at step {j + 1} ({t[j - 1]:g} then {t[j]:g}); "
            "expected them in time order"
        )
    shifted = bool(np.abs(t).max() >= TIME_PRECISION)
    return x, (t - t[0] if shifted else t), (np.asarray(y)[rows] if per_step else y), shifted


def _pad_cases(xs: list[np.ndarray], ts: list[np.ndarray]) -> dict[str, np.ndarray]:
    """``x (N, T, C)`` (0 where missing or after the end), ``observed (N, T, C)``, ``t (N, T)`` (the last
    timestamp repeated after the end), ``mask (N, T)``, ``lengths (N,)``; ``T`` the longest case."""
    n, c = len(xs), xs[0].shape[1]
    lengths = np.asarray([len(x) for x in xs], dtype=np.int64)
    T = int(lengths.max())
    out = {
        "x": np.zeros((n, T, c), dtype=np.float32),
        "observed": np.zeros((n, T, c), dtype=np.uint8),
        "t": np.zeros((n, T), dtype=np.float32),
        "mask": np.zeros((n, T), dtype=np.uint8),
        "lengths": lengths,
    }
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
        y[i, : len(yi)] = yi
    return y


def build_sequences(
    path: Path,
    fmt: str,
    cases: Cases,
    *,
    task: str,
    classes: list[str] | None,
    per_step: bool,
    channels: list[str],
    options: dict[str, Any],
    info: dict[str, Any],
    params: dict[str, np.ndarray] | None = None,
    files: list[Path] | None = None,
):
    """``cases`` as a :class:`~neurodyn.data.public_dataset.PublicDataset` in the store layout of the module doc:
    ``fields/x, t, mask, y`` (``observed`` when a value is missing inside a sequence), ``params/length`` (and
    ``params``, one value per case), ``coords/n_classes`` and ``info.classes`` for classes."""
    n = options.get("max_samples") or len(cases.xs)
    cleaned = [
        _clean_case(x, t, y, w, per_step)
        for x, t, y, w in zip(cases.xs[:n], cases.ts[:n], cases.ys[:n], cases.where[:n])
    ]
    xs, ts, ys, shifted = (list(v) for v in zip(*cleaned))
    arrays = _pad_cases(xs, ts)
    arrays["y"] = _pad_targets(ys, task, per_step, arrays["x"].shape[1])
    missing = int(((arrays["observed"] == 0) & (arrays["mask"][..., None] == 1)).sum())
    names = ("x", "t", "mask", "y") + (("observed",) if missing else ())
    fields = {
        k: ArraySource(
            tuple(arrays[k].shape), f"{path}: {k}", lambda lo, hi, a=arrays[k]: a[lo:hi], dtype=arrays[k].dtype
        )
        for k in names
    }
    spacing = [np.diff(ti) for ti in ts if len(ti) > 1]
    lengths = arrays["lengths"]
    info = {
        **info,
        "task": task,
        "per_step": per_step,
        "channels": channels,
        "n_sequences": len(xs),
        "steps": [int(lengths.min()), int(lengths.max())],
        "missing_values": missing,
        "irregular": bool(spacing) and not all(np.allclose(d, spacing[0][0]) for d in spacing),
    }
    if classes is not None:
        info["classes"] = list(classes)
    if any(shifted):
        info["time_shifted"] = "timestamps beyond 2^23 are stored from each sequence's first one (float32)"
    extra = {k: np.asarray(v)[:n] for k, v in (params or {}).items()}
    return PublicDataset(
        format=fmt,
        kind=task,
        path=path,
        files=files or [path],
        fields=fields,
        params={"length": lengths.astype(np.float32), **extra},
        coords={"n_classes": np.asarray(len(classes))} if classes is not None else {},
        inputs=("x", "t", "mask") + (("observed",) if missing else ()),
        targets=("y",),
        info=info,
        options={k: list(v) if isinstance(v, tuple) else v for k, v in options.items()},
    )


__all__ = [
    "COMMON_OPTIONS",
    "TIME_PRECISION",
    "Cases",
    "build_sequences",
    "check_sequence_arrays",
    "class_list",
    "label_index",
    "pad_sequences",
    "sequence_options",
    "take_sequences",
]
