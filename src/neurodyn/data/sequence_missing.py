"""Which steps and values of a sequence store a model sees: missing values filled (or their steps dropped), the
observed indicators, and irregular sampling drawn from regular data (``drop_steps``).

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
the sample index), so the train, validation and test splits and every re-run see the same sequences. The kept steps
move to the front of each row (:func:`compact_steps`): the mask stays a prefix, as every model reads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import DataError

if TYPE_CHECKING:
    from .store import StoredDataset

MISSING = ("ffill", "mean", "drop")


def kept_steps(
    store: StoredDataset,
    ids: np.ndarray,
    m: np.ndarray,
    obs: np.ndarray | None,
    missing: str,
    drop_steps: float,
    drop_seed: int,
) -> np.ndarray:
    """The steps kept ``(N, T)`` bool: the mask, less the steps with a missing channel (``missing=drop``) and the
    ``drop_steps`` fraction drawn at random."""
    keep = m.copy()
    if obs is not None and missing == "drop":
        keep &= obs.all(-1)
        emptied = m.any(1) & ~keep.any(1)
        if emptied.any():
            raise DataError(
                f"dataset file {store.path}: sequence {int(ids[np.argmax(emptied)])} has no step "
                "at which every channel is observed, so data.missing=drop leaves nothing of it; use "
                "data.missing=ffill or mean"
            )
    if drop_steps:
        keep = _drop_at_random(keep, drop_steps, drop_seed, _file_salt(store), ids)
    return keep


def model_inputs(x: np.ndarray, obs: np.ndarray | None, m: np.ndarray, missing: str, observed_channels: bool):
    """``x`` filled as ``missing`` says (with the observed indicators appended when ``observed_channels``), and the
    ``(N, T, C')`` bool array of the measured values (``None`` when every value was measured)."""
    measured = None
    if obs is not None:
        x = fill_missing(x.astype(np.float32), obs, m, missing)
        measured = obs
    if observed_channels:
        ind = obs if obs is not None else np.ones(x.shape, dtype=bool)
        x = np.concatenate([x, (ind & m[..., None]).astype(np.float32)], axis=-1)
        if measured is not None:
            measured = np.concatenate([measured, np.ones_like(measured)], axis=-1)
    return x, (None if measured is None else measured & m[..., None])


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


def compact_steps(
    keep: np.ndarray, x: np.ndarray, t: np.ndarray, step_y: np.ndarray | None, obs: np.ndarray | None, y: np.ndarray
):
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


def prepare_raw_inputs(
    x: np.ndarray, mask: np.ndarray, missing: str = "ffill", observed_channels: bool = False
) -> np.ndarray:
    """Raw inputs ``x (N, T, C)`` with NaN for a missing value, as a run trained with ``data.missing`` and
    ``data.observed_channels`` saw them: filled (``ffill``; ``mean`` and ``drop`` leave NaN, which the task encodes
    as the training mean: one prediction cannot drop steps) and with the ``C`` observed indicators appended when the
    run had them. ``mask (N, T)``: the sequences' steps. Returns float32 ``(N, T, C)`` or ``(N, T, 2C)``."""
    x = np.asarray(x, dtype=np.float32)
    m = np.asarray(mask, dtype=bool)
    obs = np.isfinite(x)
    if not obs.all():
        x = fill_missing(np.where(obs, x, 0.0), obs, m, "ffill" if missing == "ffill" else "mean")
    if observed_channels:
        x = np.concatenate([x, (obs & m[..., None]).astype(np.float32)], axis=-1)
    return x


def fill_missing(x: np.ndarray, obs: np.ndarray, m: np.ndarray, missing: str) -> np.ndarray:
    """``x`` with its unobserved values filled as ``missing`` says (module doc); NaN where the training mean goes."""
    obs = obs & m[..., None]
    if missing == "mean" or missing == "drop":
        return np.where(obs, x, np.nan).astype(np.float32)
    T = x.shape[1]
    steps = np.arange(T)[None, :, None]
    last = np.maximum.accumulate(np.where(obs, steps, -1), axis=1)  # last observed step at or before each
    first = np.argmax(obs, axis=1)[:, None, :]  # first observed step (N, 1, C)
    src = np.where(last >= 0, last, first)
    filled = np.take_along_axis(x, np.broadcast_to(src, x.shape), axis=1)
    seen = obs.any(axis=1, keepdims=True)
    return np.where(seen, filled, np.nan).astype(np.float32)


__all__ = ["MISSING", "compact_steps", "fill_missing", "kept_steps", "model_inputs", "prepare_raw_inputs"]
