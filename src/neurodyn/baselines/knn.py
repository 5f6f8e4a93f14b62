"""The ``knn`` baseline: the one nearest training series (1-NN), under the squared Euclidean distance or DTW.

Fitted by keeping the resampled training series ``X (N, L, C)`` and their outputs (:meth:`~neurodyn.baselines.
fitted.FittedSequenceModel.targets_out`: logits ``log 1 = 0`` for a series' class and ``log 1e-6`` for the others,
or its targets). A series ``x (L, C)`` is predicted as the output of ``argmin_i d(x, X_i)`` (ties: the first
training series) with

* ``distance=euclidean``: ``d(x, X_i) = sum_{j,c} (x[j,c] - X_i[j,c])^2``;
* ``distance=dtw``: dependent multivariate DTW with a Sakoe-Chiba band of half-width ``round(window * L)``
  (:mod:`neurodyn.baselines.dtw`).

**Time.** :meth:`KNNModel.predict_seconds` times one training series against up to 64 others and multiplies by
the ``n x N`` pairs to come: DTW costs ``L^2`` per pair, so a 1-NN over hundreds of long series takes many minutes,
and the passes over whole splits say so before they start.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import torch

from ..errors import ConfigError, check_choice
from ..models.registry import register
from .dtw import dtw_distances, euclidean_distances
from .fitted import FittedConfig, FittedSequenceModel


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
        self.set_state(train_x=x.float(), train_out=self.targets_out(y).float())

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
