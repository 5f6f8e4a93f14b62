"""What every fitted baseline shares: :class:`FittedConfig` (its config fields) and :class:`FittedSequenceModel`.

A fitted baseline is an ``nn.Module`` whose state is *fitted* in one pass over the training split (no gradient,
no optimizer): :meth:`FittedSequenceModel.fit` takes the whole training split at once,

    ``fit(x (N, T, C), t (N, T) | None, mask (N, T) | None, y (N,) class indices | (N, k) normalised targets)``,

resamples every series' real steps to one length ``L`` (``length``, or the longest training series, at least
``min_length``; :func:`neurodyn.ops.resample.resample_steps`, linear interpolation of the steps ``mask`` marks,
which need not be a prefix) and hands ``x' (N, L, C)`` to the subclass's :meth:`~FittedSequenceModel.fit_state`.
The fitted state lives in buffers whose shapes come from the training data, so a ``state_dict`` (a checkpoint)
restores it into a model built from the config alone (:meth:`~FittedSequenceModel._load_from_state_dict` takes the
shapes from the state); ``fitted``, ``regression`` and ``steps`` (``L``) are buffers too.

Call: ``model(x (B, T, C), t=None, mask=None) -> (B, out_channels)``: class logits, or regression values in
normalised units; a model not fitted yet predicts zeros (uniform logits, the training mean). Classification or
regression is read from the targets at fit time (integer class indices, or floats ``(N, k)``); per-step targets are
refused by the config (``per_step``). Timestamps are not used (as by ``gru`` and ``lstm``).

**Time.** ``predict_seconds(n) -> (seconds, what was timed) | None`` estimates, before a pass starts, the seconds to
predict ``n`` series; the passes over whole splits (:func:`neurodyn.baselines.fit.fit_baseline`, ``neurodyn
evaluate``) say it before they start when it exceeds a minute (:func:`neurodyn.progress.evaluate_stage`), and
``fit(..., progress=...)`` may show its own long stages (:mod:`neurodyn.progress`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from ..errors import ConfigError, check_min
from ..models.inputs import check_sequence_input
from ..ops.resample import resample_steps

LOG_EPS = math.log(1e-6)  # the log-probability of a class that was not chosen (finite: checkpoints refuse -inf)


@dataclass
class FittedConfig:
    """Config of the ``majority`` baseline (and the fields every fitted baseline has).

    Attributes:
        in_channels (int, 1): features per step (set from the data).
        out_channels (int, 2): classes or regression targets (set from the data).
        per_step (bool, False): per-step targets; refused: the fitted baselines predict one output per sequence.
        length (int, 0): steps every series is resampled to; 0: the longest training series.
    """

    in_channels: int = 1
    out_channels: int = 2
    per_step: bool = False
    length: int = 0

    MODEL: ClassVar[str] = "majority"  # the registered name its messages give

    def __post_init__(self) -> None:
        check_min(self.MODEL, self, ("in_channels", "out_channels"), 1)
        check_min(self.MODEL, self, ("length",), 0)
        if self.per_step:
            raise ConfigError(
                f"the {self.MODEL} baseline predicts one output per sequence, and these "
                "data have per-step targets; use a sequence model (e.g. gru/sequence) for them"
            )


class FittedSequenceModel(nn.Module):
    """A model fitted in one pass (module docstring). Subclasses implement :meth:`fit_state` and :meth:`predict`
    (and :meth:`predict_seconds` where a pass can be long); ``min_length``: the fewest steps a series is resampled
    to."""

    min_length = 1

    def __init__(self, cfg: FittedConfig):
        super().__init__()
        self.cfg = cfg  # validated when it was made (FittedConfig.__post_init__)
        self.register_buffer("fitted", torch.zeros((), dtype=torch.bool))
        self.register_buffer("regression", torch.zeros((), dtype=torch.bool))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # a fitted state's shapes depend on the training data: take them from the checkpoint
        for name, buf in self._buffers.items():
            have = state_dict.get(prefix + name)
            if buf is not None and have is not None and have.shape != buf.shape:
                self._buffers[name] = buf.new_empty(have.shape, dtype=have.dtype)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def set_state(self, **tensors: torch.Tensor) -> None:
        """Keep fitted tensors as buffers (created or replaced, whatever their shape), on the model's device."""
        for name, value in tensors.items():
            self._buffers[name] = value.detach().to(self.fitted.device)

    def _series(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return resample_steps(x, mask, int(self.steps))

    @torch.no_grad()
    def fit(
        self, x: torch.Tensor, t: torch.Tensor | None, mask: torch.Tensor | None, y: torch.Tensor, progress: Any = False
    ) -> None:
        """Fit on the training split: ``x (N, T, C)`` normalised, ``mask (N, T)``, ``y (N,)`` class indices or
        ``(N, k)`` normalised targets; ``progress`` (:mod:`neurodyn.progress`) shows a long fit's stages."""
        check_sequence_input(x, t, mask, self.cfg.in_channels, type(self).__name__, self)
        regression = y.is_floating_point()
        if regression and (y.dim() != 2 or y.shape[1] != self.cfg.out_channels):
            raise ValueError(
                f"{type(self).__name__}: regression targets must have shape (N, "
                f"{self.cfg.out_channels}), got {tuple(y.shape)}"
            )
        if not regression and (y.dim() != 1 or int(y.min()) < 0 or int(y.max()) >= self.cfg.out_channels):
            raise ValueError(f"{type(self).__name__}: class indices must be (N,) in 0..{self.cfg.out_channels - 1}")
        longest = int(mask.sum(1).max()) if mask is not None else x.shape[1]
        self.steps.fill_(max(self.cfg.length or longest, self.min_length))
        self.regression.fill_(bool(regression))
        self.fit_state(self._series(x, mask), y, progress)
        self.fitted.fill_(True)

    def forward(self, x: torch.Tensor, t: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        check_sequence_input(x, t, mask, self.cfg.in_channels, type(self).__name__, self)
        if not x.is_floating_point():
            raise ValueError(f"{type(self).__name__} expects floating-point input x; got {x.dtype}; call x.float()")
        if not bool(self.fitted):
            return x.new_zeros(x.shape[0], self.cfg.out_channels)
        return self.predict(self._series(x, mask)).to(x.dtype)

    def targets_out(self, y: torch.Tensor) -> torch.Tensor:
        """The output rows ``(N, out)`` that reproduce ``y``: log-one-hot class logits, or the targets."""
        if y.is_floating_point():
            return y
        return torch.full((len(y), self.cfg.out_channels), LOG_EPS, device=y.device).scatter_(1, y[:, None], 0.0)

    def fit_state(self, x: torch.Tensor, y: torch.Tensor, progress: Any = False) -> None:
        """Fit the state (:meth:`set_state`) on resampled series ``x (N, L, C)`` and their targets ``y`` (``(N,)``
        class indices or ``(N, k)`` normalised targets); ``progress``: the one idiom of :mod:`neurodyn.progress`."""
        raise NotImplementedError

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, out_channels)`` logits or normalised targets of resampled series ``x (B, L, C)`` (fitted)."""
        raise NotImplementedError

    def predict_seconds(self, n_series: int) -> tuple[float, str] | None:
        """About how many seconds predicting ``n_series`` series takes here, and what was timed (module docstring);
        None before the model is fitted or where it is cheap."""
        return None
