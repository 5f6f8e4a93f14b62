"""What MultiRocket and Hydra share: random-convolution features, scaled on the training split, and a ridge
classifier or regressor (:class:`FeatureRidgeModel`).

Fitted on resampled series ``X (N, L, C)``:

1. the transform's parameters (:meth:`FeatureRidgeModel.fit_transform`, from ``X`` and the config's ``seed``) and the
   features ``F = phi(X) (N, P)`` (:meth:`~FeatureRidgeModel.transform`; one stage of ``fit(..., progress=...)``);
2. the features scaled with statistics of the training features (:meth:`~FeatureRidgeModel.scaling`: standardised
   by default, ``Z = (F - mu) / sigma`` with ``sigma = 1`` for a constant feature);
3. ridge regression ``min_W |T - Z W - 1 b^T|^2 + alpha |W|^2`` on targets ``T``: one-vs-rest ``+-1`` columns of
   the classes (a ridge classifier; its scores are the logits) or the normalised regression targets, ``alpha``
   chosen from ``n_alphas`` values log-spaced in ``[alpha_min, alpha_max]`` by exact leave-one-out error
   (:func:`neurodyn.baselines.ridge.ridge_loo`; both papers use scikit-learn's ``RidgeClassifierCV`` with
   ``logspace(-3, 3, 10)``).

A series is predicted as ``scaled(phi(x)) W + b``. Subclasses name their transform's buffers
(:attr:`~FeatureRidgeModel.TRANSFORM_BUFFERS`) and implement :meth:`~FeatureRidgeModel.fit_transform` and
:meth:`~FeatureRidgeModel.transform`; :meth:`~FeatureRidgeModel.predict_seconds` times a few series.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from ..errors import ConfigError, check_min
from ..progress import Stage
from .fitted import FittedConfig, FittedSequenceModel
from .ridge import ridge_loo


@dataclass
class RidgeConfig(FittedConfig):
    """The ridge fields of a feature + ridge baseline (and those of :class:`FittedConfig`):

    Attributes:
        alpha_min (float, 0.001): smallest ridge penalty tried.
        alpha_max (float, 1000.0): largest ridge penalty tried.
        n_alphas (int, 10): penalties tried, log-spaced (the papers: logspace(-3, 3, 10)).
        seed (int, 0): the transform's random draws.
    """

    alpha_min: float = 1e-3
    alpha_max: float = 1e3
    n_alphas: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_min(self.MODEL, self, ("n_alphas",), 1)
        if not 0 < self.alpha_min <= self.alpha_max:
            raise ConfigError(
                f"model.alpha_min and alpha_max must satisfy 0 < alpha_min <= alpha_max; got "
                f"{self.alpha_min}, {self.alpha_max}"
            )


class FeatureRidgeModel(FittedSequenceModel):
    """Features of a fitted transform, scaled, and ridge (module docstring)."""

    TRANSFORM_BUFFERS: ClassVar[dict[str, tuple[tuple[int, ...], torch.dtype]]] = {}
    FEATURE_ROWS = 256  # training series transformed at a time while fitting (a stage's unit of progress)

    def __init__(self, cfg: RidgeConfig):
        super().__init__(cfg)
        buffers = {
            **self.TRANSFORM_BUFFERS,
            "feature_mean": ((0,), torch.float32),
            "feature_scale": ((0,), torch.float32),
            "weight": ((0, cfg.out_channels), torch.float32),
            "bias": ((cfg.out_channels,), torch.float32),
            "alpha": ((), torch.float64),
        }
        for name, (shape, dtype) in buffers.items():
            self.register_buffer(name, torch.zeros(shape, dtype=dtype))

    # ---------------------------------------------------------------------------------------- the subclass's part
    def fit_transform(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The transform's parameters fitted on the training series ``x (N, L, C)`` (kept as buffers)."""
        raise NotImplementedError

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        """Features ``(B, P)`` of series ``x (B, L, C)`` under the fitted parameters."""
        raise NotImplementedError

    def scaling(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, scale)`` of the training features ``(N, P)`` (float64): their mean and standard deviation."""
        mean, scale = feats.mean(0), feats.std(0, unbiased=False)
        return mean, torch.where(scale > 0, scale, torch.ones_like(scale))  # a constant feature stays 0

    def scaled(self, feats: torch.Tensor, mean: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """The features the ridge reads: ``(F - mean) / scale``."""
        return (feats - mean) / scale

    # ---------------------------------------------------------------------------------------- the shared part
    def transform_params(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k) for k in self.TRANSFORM_BUFFERS}

    def fit_state(self, x, y, progress=False):
        cfg = self.cfg
        if len(x) < 2:
            raise ValueError(f"{self.registry_name} needs at least 2 training series to choose its ridge penalty")
        self.set_state(**self.fit_transform(x.float()))
        feats = self._training_features(x.float(), progress).double()
        mean, scale = self.scaling(feats)
        target = (
            y.double() if y.is_floating_point() else 2.0 * nn.functional.one_hot(y, cfg.out_channels).double() - 1.0
        )
        alphas = torch.logspace(math.log10(cfg.alpha_min), math.log10(cfg.alpha_max), cfg.n_alphas, dtype=torch.float64)
        w, b, alpha = ridge_loo(self.scaled(feats, mean, scale), target, alphas)
        self.set_state(
            feature_mean=mean.float(),
            feature_scale=scale.float(),
            weight=w.float(),
            bias=b.float(),
            alpha=torch.tensor(alpha, dtype=torch.float64),
        )

    def predict(self, x):
        return self.scaled(self.transform(x.float()), self.feature_mean, self.feature_scale) @ self.weight + self.bias

    def _training_features(self, x: torch.Tensor, progress) -> torch.Tensor:
        """The features of the training series, as one stage: the first few series timed give the estimate, then
        the rest in blocks of :attr:`FEATURE_ROWS` (each series' features depend on it alone)."""
        n, head = len(x), min(len(x), 8)
        t0 = time.perf_counter()
        parts = [self.transform(x[:head])]
        estimate = (time.perf_counter() - t0) / head * n
        with Stage(
            f"{self.registry_name}: features of the {n} training series",
            n,
            "series",
            progress,
            estimate=estimate,
            detail=f"{head} series timed",
        ) as stage:
            stage.update(head)
            for lo in range(head, n, self.FEATURE_ROWS):
                parts.append(self.transform(x[lo : lo + self.FEATURE_ROWS]))
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
