"""Fitted baselines of the sequence task: ``majority``, ``knn`` (1-nearest neighbour) and ``minirocket``.

They are not trained by gradient descent: each is *fitted* in one pass over the training split. The trainer
(``neurodyn.train.trainer``) sees the class attribute ``fits_in_one_pass``: its first epoch hands every training
batch, normalised as for any sequence model (``SequenceTask.fit_model``), to :meth:`FittedSequenceModel.fit`, makes
no optimizer step, evaluates the validation split and writes the checkpoints; that one epoch is the whole training
(``train.epochs`` larger than 1 changes nothing). The fitted state lives in buffers, so checkpoints, exact resume,
``load_run(...).predict`` and ``compare`` work unchanged; a model not fitted yet predicts zeros (uniform logits,
the training mean).

Call: ``model(x, t=None, mask=None) -> (B, out_channels)``: class logits, or regression values in normalised units.
Classification or regression is read from the targets at fit time (integer class indices, or floats ``(N, k)``).
Per-step targets are refused.

**Time.** ``predict_seconds(n)`` estimates, before a pass starts, the seconds to predict ``n`` series: ``knn`` times
one series against up to 64 training series and multiplies by the pairs to come (DTW costs ``length^2`` per pair,
so a 1-NN over hundreds of long series takes many minutes), ``minirocket`` times the features of a few series. The
passes over whole splits (the trainer's, ``neurodyn evaluate``) show it before they start when it exceeds a
minute, and ``fit(..., progress=...)`` shows MiniRocket's features of the training series as a stage
(:mod:`neurodyn.progress`).

**Lengths and masks.** Every series' real steps (``mask``; they need not be a prefix) are linearly interpolated to
one length (``length``: by default the longest training series, at least 9 for MiniRocket's kernels;
``ops.resample.resample_steps``), so series of unequal lengths, and test files of another length, compare step for
step. Timestamps are not used (as by ``gru`` and ``lstm``).

* ``majority``: the training-class frequencies as log-probabilities (the most frequent class; ties: the lowest
  index), or the training mean of the targets.
* ``knn``: the one nearest training series under the squared Euclidean distance (``distance=euclidean``) or DTW
  with a Sakoe-Chiba band of ``window`` times the length (``distance=dtw``; ``ops.dtw``); its class (logits
  ``log 1 = 0`` for it, ``log 1e-6`` for the others) or its targets. Ties: the first training series.
* ``minirocket``: MiniRocket features (Dempster et al. 2021; ``ops.minirocket``) standardised with their training
  mean and deviation, then a ridge classifier (one-vs-rest on targets +-1, scores as logits) or ridge regressor,
  its penalty chosen from ``n_alphas`` values log-spaced in ``[alpha_min, alpha_max]`` by exact leave-one-out
  error (``ops.ridge``; the paper uses scikit-learn's ``RidgeClassifierCV`` with ``logspace(-3, 3, 10)``). Its
  random draws come from ``seed``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from ..errors import ConfigError, check_choice, check_min
from ..ops.dtw import dtw_distances, euclidean_distances
from ..ops.minirocket import KERNEL_LENGTH, minirocket_fit, minirocket_transform
from ..ops.resample import resample_steps
from ..ops.ridge import ridge_loo
from ..progress import Stage
from .inputs import check_sequence_input
from .registry import register

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
            raise ConfigError(f"the {self.MODEL} baseline predicts one output per sequence, and these "
                              "data have per-step targets; use a sequence model (e.g. gru/sequence) for them")


class FittedSequenceModel(nn.Module):
    """A model fitted in one pass (module docstring). Subclasses implement :meth:`fit_state` and :meth:`predict`."""

    fits_in_one_pass = True
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

    def _set(self, **tensors: torch.Tensor) -> None:
        for name, value in tensors.items():
            self._buffers[name] = value.detach().to(self.fitted.device)

    def _series(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return resample_steps(x, mask, int(self.steps))

    @torch.no_grad()
    def fit(self, x: torch.Tensor, t: torch.Tensor | None, mask: torch.Tensor | None, y: torch.Tensor,
            progress: Any = False) -> None:
        """Fit on the training split: ``x (N, T, C)`` normalised, ``mask (N, T)``, ``y (N,)`` class indices or
        ``(N, k)`` normalised targets; ``progress`` (:mod:`neurodyn.progress`) shows a long fit's stages."""
        check_sequence_input(x, t, mask, self.cfg.in_channels, type(self).__name__, self)
        regression = y.is_floating_point()
        if regression and (y.dim() != 2 or y.shape[1] != self.cfg.out_channels):
            raise ValueError(f"{type(self).__name__}: regression targets must have shape (N, "
                             f"{self.cfg.out_channels}), got {tuple(y.shape)}")
        if not regression and (y.dim() != 1 or int(y.min()) < 0 or int(y.max()) >= self.cfg.out_channels):
            raise ValueError(f"{type(self).__name__}: class indices must be (N,) in 0..{self.cfg.out_channels - 1}")
        longest = int(mask.sum(1).max()) if mask is not None else x.shape[1]
        self.steps.fill_(max(self.cfg.length or longest, self.min_length))
        self.regression.fill_(bool(regression))
        self.fit_state(self._series(x, mask), y, progress)
        self.fitted.fill_(True)

    def forward(self, x: torch.Tensor, t: torch.Tensor | None = None, mask: torch.Tensor | None = None
                ) -> torch.Tensor:
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
        raise NotImplementedError

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def predict_seconds(self, n_series: int) -> tuple[float, str] | None:
        """About how many seconds predicting ``n_series`` series takes here, and what was timed (module docstring);
        None before the model is fitted or where it is cheap."""
        return None


@register("majority", FittedConfig)
class MajorityModel(FittedSequenceModel):
    def __init__(self, cfg: FittedConfig):
        super().__init__(cfg)
        self.register_buffer("output", torch.zeros(cfg.out_channels))

    def fit_state(self, x, y, progress=False):
        if y.is_floating_point():
            self._set(output=y.double().mean(0).float())
        else:
            counts = torch.bincount(y, minlength=self.cfg.out_channels).double()
            self._set(output=(counts / counts.sum()).log().clamp_min(LOG_EPS).float())

    def predict(self, x):
        return self.output.expand(len(x), -1)


@dataclass
class KNNConfig(FittedConfig):
    """Config of the ``knn`` baseline (the fields of ``majority``'s :class:`FittedConfig`, and):

    Attributes:
        distance (str, "euclidean"): euclidean (squared, step by step) | dtw (dependent multivariate DTW).
        window (float, 0.1): DTW's Sakoe-Chiba band half-width as a fraction of the length (1: no band).
    """

    distance: str = "euclidean"
    window: float = 0.1

    MODEL: ClassVar[str] = "knn"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("model.distance", self.distance, ("euclidean", "dtw"))
        if not 0 <= self.window <= 1:
            raise ConfigError(f"model.window is a fraction of the length in [0, 1], got {self.window}")


@register("knn", KNNConfig)
class KNNModel(FittedSequenceModel):
    def __init__(self, cfg: KNNConfig):
        super().__init__(cfg)
        self.register_buffer("train_x", torch.zeros(0, 0, cfg.in_channels))
        self.register_buffer("train_out", torch.zeros(0, cfg.out_channels))

    def fit_state(self, x, y, progress=False):
        self._set(train_x=x.float(), train_out=self.targets_out(y).float())

    @torch.no_grad()
    def predict_seconds(self, n_series: int) -> tuple[float, str] | None:
        """One training series against up to 64 others, timed, times the ``n_series x N_train`` pairs to come."""
        ref = self.train_x
        if not bool(self.fitted) or not len(ref):
            return None
        k = min(len(ref), 64)
        t0 = time.perf_counter()
        self._distances(ref[:1], ref[:k])
        per_pair = (time.perf_counter() - t0) / k
        pairs = n_series * len(ref)
        return per_pair * pairs, f"{k} {self.cfg.distance} pairs timed, times {pairs:,} pairs"

    def distances(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, N_train)`` distances of resampled series ``x (B, length, C)`` to the training series."""
        return self._distances(x, self.train_x.to(x.dtype))

    def _distances(self, x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        if self.cfg.distance == "euclidean":
            return euclidean_distances(x, ref)
        return dtw_distances(x, ref, window=int(round(self.cfg.window * int(self.steps))))

    def predict(self, x):
        return self.train_out[self.distances(x).argmin(1)]


@dataclass
class MiniRocketConfig(FittedConfig):
    """Config of the ``minirocket`` baseline (the fields of :class:`FittedConfig`, and):

    Attributes:
        n_features (int, 10000): features requested; 84 x (n_features // 84) are made (the paper: 10,000 -> 9,996).
        max_dilations (int, 32): most dilations per kernel (the paper's default).
        alpha_min (float, 0.001): smallest ridge penalty tried.
        alpha_max (float, 1000.0): largest ridge penalty tried.
        n_alphas (int, 10): penalties tried, log-spaced (the paper: logspace(-3, 3, 10)).
        seed (int, 0): the draws of the biases' series and of the channel subsets.
    """

    n_features: int = 10_000
    max_dilations: int = 32
    alpha_min: float = 1e-3
    alpha_max: float = 1e3
    n_alphas: int = 10
    seed: int = 0

    MODEL: ClassVar[str] = "minirocket"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_min("minirocket", self, ("n_features",), 84)
        check_min("minirocket", self, ("max_dilations", "n_alphas"), 1)
        if not 0 < self.alpha_min <= self.alpha_max:
            raise ConfigError(f"model.alpha_min and alpha_max must satisfy 0 < alpha_min <= alpha_max; got "
                              f"{self.alpha_min}, {self.alpha_max}")


@register("minirocket", MiniRocketConfig)
class MiniRocketModel(FittedSequenceModel):
    min_length = KERNEL_LENGTH

    def __init__(self, cfg: MiniRocketConfig):
        super().__init__(cfg)
        for name, shape, dtype in (("dilations", (0,), torch.long), ("per_dilation", (0,), torch.long),
                                   ("channels", (0, 84, cfg.in_channels), torch.float32),
                                   ("biases", (0,), torch.float32), ("feature_mean", (0,), torch.float32),
                                   ("feature_scale", (0,), torch.float32), ("weight", (0, cfg.out_channels),
                                                                            torch.float32),
                                   ("bias", (cfg.out_channels,), torch.float32), ("alpha", (), torch.float64)):
            self.register_buffer(name, torch.zeros(shape, dtype=dtype))

    def _params(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k) for k in ("dilations", "per_dilation", "channels", "biases")}

    def fit_state(self, x, y, progress=False):
        cfg = self.cfg
        params = minirocket_fit(x.float(), cfg.n_features, cfg.max_dilations, cfg.seed)
        self._set(**params)
        feats = self._training_features(x.float(), params, progress).double()
        mean, scale = feats.mean(0), feats.std(0, unbiased=False)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # a constant feature stays 0
        target = y.double() if y.is_floating_point() else \
            2.0 * nn.functional.one_hot(y, cfg.out_channels).double() - 1.0
        alphas = torch.logspace(math.log10(cfg.alpha_min), math.log10(cfg.alpha_max), cfg.n_alphas,
                                dtype=torch.float64)
        if len(x) < 2:
            raise ValueError("minirocket needs at least 2 training series to choose its ridge penalty")
        w, b, alpha = ridge_loo((feats - mean) / scale, target, alphas)
        self._set(feature_mean=mean.float(), feature_scale=scale.float(), weight=w.float(), bias=b.float(),
                  alpha=torch.tensor(alpha, dtype=torch.float64))

    def predict(self, x):
        feats = minirocket_transform(x.float(), self._params())
        return ((feats - self.feature_mean) / self.feature_scale) @ self.weight + self.bias

    FEATURE_ROWS = 256  # training series transformed at a time while fitting (a stage's unit of progress)

    def _training_features(self, x: torch.Tensor, params: dict[str, torch.Tensor], progress) -> torch.Tensor:
        """The features of the training series, as one stage: the first few series timed give the estimate, then
        the rest in blocks of :attr:`FEATURE_ROWS` (each series' features depend on it alone)."""
        n, head = len(x), min(len(x), 8)
        t0 = time.perf_counter()
        parts = [minirocket_transform(x[:head], params)]
        estimate = (time.perf_counter() - t0) / head * n
        with Stage(f"minirocket: features of the {n} training series", n, "series", progress, estimate=estimate,
                   detail=f"{head} series timed") as stage:
            stage.update(head)
            for lo in range(head, n, self.FEATURE_ROWS):
                parts.append(minirocket_transform(x[lo:lo + self.FEATURE_ROWS], params))
                stage.update(len(parts[-1]))
        return torch.cat(parts)

    @torch.no_grad()
    def predict_seconds(self, n_series: int) -> tuple[float, str] | None:
        """The features of a few series of the fitted length, timed, times ``n_series``."""
        if not bool(self.fitted):
            return None
        k = min(max(n_series, 1), 8)
        x = torch.randn(k, int(self.steps), self.cfg.in_channels, generator=torch.Generator().manual_seed(0))
        t0 = time.perf_counter()
        self.predict(x.to(self.weight.device))
        return (time.perf_counter() - t0) / k * n_series, f"{k} series timed"
