"""Long sequences at a CPU's cost (``data.max_steps``): average pooling in time of a sequence store's arrays.

For per-sequence targets (a class or a regression value of the whole sequence) a sequence store whose longest
sequence ``T_max`` exceeds ``max_steps`` steps is average-pooled in time by the integer factor
``k = ceil(T_max / max_steps)``, after ``missing=drop`` and ``drop_steps`` removed their steps
(:mod:`neurodyn.data.sequence_missing`). Pooled step ``j`` of a sequence is the masked mean of the window
``[jk, (j+1)k)``::

    x'_j = mean over valid i in [jk, (j+1)k) of x_i      (per channel: over the steps where it was observed)
    t'_j = mean over valid i in [jk, (j+1)k) of t_i      mask'_j = any valid i in [jk, (j+1)k)

so a sequence of ``L`` valid steps becomes ``ceil(L / k)``. ``max_steps``: ``"auto"`` pools to at most
:data:`AUTO_MAX_STEPS` steps for per-sequence targets and never for per-step ones (pooling would misalign their
labels, so an integer limit there is a ConfigError); an integer ``>= 1``: that limit; ``0`` or ``None``: never.
``k`` is computed from ``pool_from`` (the training file's ``T_max``, which :mod:`neurodyn.data.assembly` passes to
every split and test file of a run, so they pool alike), else from this file's. The dataset
(:class:`~neurodyn.data.sequence_dataset.SequenceDataset`) and a trained run's predictions (``load_run``) pool with
these two functions.

Pooling transforms the data, so it is never silent: :func:`describe_pooling` is the line the run header
(``neurodyn train``) and ``summary.md`` print of every sequence run ("steps pooled by k: T -> T/k" or "raw series,
T steps"). The fitted baselines whose published protocol reads the raw series (``knn/sequence``,
``minirocket/sequence``, ``multirocket/sequence``, ``hydra/sequence``) set ``max_steps: 0`` in their presets: they
pool only when asked explicitly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConfigError

AUTO_MAX_STEPS = 256  # data.max_steps "auto": per-sequence targets are pooled to at most this many steps


def pool_factor(max_steps: Any, t_max: int, per_step: bool) -> int:
    """The time-pooling factor ``k = ceil(t_max / limit)`` of ``data.max_steps`` (module doc), 1 for no pooling;
    one ConfigError for a value that is not ``auto``, ``0`` / ``None`` or an integer ``>= 1``, and for an integer
    limit on per-step targets."""
    if max_steps is None or max_steps == "auto":
        limit = None if max_steps is None or per_step else AUTO_MAX_STEPS
    elif isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 0:
        raise ConfigError(
            f"data.max_steps must be 'auto', 0 (never pool) or a whole number >= 1 (the most time "
            f"steps a sequence keeps; longer ones are average-pooled in time); got {max_steps!r}"
        )
    else:
        limit = int(max_steps) or None
        if limit and per_step:
            raise ConfigError(
                f"data.max_steps={limit}: this data has per-step targets, which pooling steps together "
                "would misalign; set data.max_steps=0 (or auto, which never pools them), or use "
                "data.window to cut long sequences"
            )
    if not limit or t_max <= limit:
        return 1
    return -(-int(t_max) // limit)


def describe_pooling(t_max: int, k: int, max_steps: Any = None) -> str:
    """How a run's sequences reach the model, in words: ``"steps pooled by k: T -> ceil(T/k) (data.max_steps=M)"``
    when pooled by ``k > 1``, else ``"raw series, T steps"`` (``t_max``: the training file's longest sequence
    before pooling)."""
    if k > 1:
        limit = "" if max_steps is None else f" (data.max_steps={max_steps})"
        return f"steps pooled by {k}: {t_max} -> {-(-int(t_max) // k)}{limit}"
    return f"raw series, {t_max} steps"


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


__all__ = ["AUTO_MAX_STEPS", "describe_pooling", "pool_factor", "pool_in_time"]
