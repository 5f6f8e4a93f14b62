"""The ``minirocket`` baseline: MiniRocket features (Dempster et al. 2021) and a ridge classifier or regressor.

Fitted on resampled series ``X (N, L, C)`` (``L >= 9``, the kernels' length):

1. the transform's parameters (dilations, channel subsets, biases) drawn from ``X`` and ``seed``
   (:func:`neurodyn.baselines.minirocket_transform.minirocket_fit`), and the features ``F = phi(X) (N, P)``,
   ``P = 84 * (n_features // 84)`` proportions of positive values;
2. the features standardised with their training mean and deviation, ``Z = (F - mu) / sigma`` (``sigma = 1`` for
   a constant feature);
3. ridge regression ``min_W |T - Z W - 1 b^T|^2 + alpha |W|^2`` on targets ``T``: one-vs-rest ``+-1`` columns of
   the classes (a ridge classifier; its scores are the logits) or the normalised regression targets; ``alpha``
   chosen from ``n_alphas`` values log-spaced in ``[alpha_min, alpha_max]`` by exact leave-one-out error
   (:func:`neurodyn.baselines.ridge.ridge_loo`; the paper uses scikit-learn's ``RidgeClassifierCV`` with
   ``logspace(-3, 3, 10)``).

A series is predicted as ``((phi(x) - mu) / sigma) W + b``. The features of the training series are one stage of
``fit(..., progress=...)`` (:mod:`neurodyn.progress`); :meth:`MiniRocketModel.predict_seconds` times a few series.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from ..errors import ConfigError, check_min
from ..models.registry import register
from ..progress import Stage
from .fitted import FittedConfig, FittedSequenceModel
from .minirocket_transform import KERNEL_LENGTH, minirocket_fit, minirocket_transform
from .ridge import ridge_loo


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
            raise ConfigError(
                f"model.alpha_min and alpha_max must satisfy 0 < alpha_min <= alpha_max; got "
                f"{self.alpha_min}, {self.alpha_max}"
            )


@register("minirocket", MiniRocketConfig)
class MiniRocketModel(FittedSequenceModel):
    min_length = KERNEL_LENGTH

    def __init__(self, cfg: MiniRocketConfig):
        super().__init__(cfg)
        for name, shape, dtype in (
            ("dilations", (0,), torch.long),
            ("per_dilation", (0,), torch.long),
            ("channels", (0, 84, cfg.in_channels), torch.float32),
            ("biases", (0,), torch.float32),
            ("feature_mean", (0,), torch.float32),
            ("feature_scale", (0,), torch.float32),
            ("weight", (0, cfg.out_channels), torch.float32),
            ("bias", (cfg.out_channels,), torch.float32),
            ("alpha", (), torch.float64),
        ):
            self.register_buffer(name, torch.zeros(shape, dtype=dtype))

    def _params(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k) for k in ("dilations", "per_dilation", "channels", "biases")}

    def fit_state(self, x, y, progress=False):
        cfg = self.cfg
        params = minirocket_fit(x.float(), cfg.n_features, cfg.max_dilations, cfg.seed)
        self.set_state(**params)
        feats = self._training_features(x.float(), params, progress).double()
        mean, scale = feats.mean(0), feats.std(0, unbiased=False)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # a constant feature stays 0
        target = (
            y.double() if y.is_floating_point() else 2.0 * nn.functional.one_hot(y, cfg.out_channels).double() - 1.0
        )
        alphas = torch.logspace(math.log10(cfg.alpha_min), math.log10(cfg.alpha_max), cfg.n_alphas, dtype=torch.float64)
        if len(x) < 2:
            raise ValueError("minirocket needs at least 2 training series to choose its ridge penalty")
        w, b, alpha = ridge_loo((feats - mean) / scale, target, alphas)
        self.set_state(
            feature_mean=mean.float(),
            feature_scale=scale.float(),
            weight=w.float(),
            bias=b.float(),
            alpha=torch.tensor(alpha, dtype=torch.float64),
        )

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
        with Stage(
            f"minirocket: features of the {n} training series",
            n,
            "series",
            progress,
            estimate=estimate,
            detail=f"{head} series timed",
        ) as stage:
            stage.update(head)
            for lo in range(head, n, self.FEATURE_ROWS):
                parts.append(minirocket_transform(x[lo : lo + self.FEATURE_ROWS], params))
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
