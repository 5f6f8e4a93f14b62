"""The ``hydra`` baseline: Hydra features (Dempster, Schmidt & Webb, DMKD 2023) and a ridge classifier or regressor.

Fitted on resampled series ``X (N, L, C)`` (``L >= 9``) by :class:`~neurodyn.baselines.feature_ridge.
FeatureRidgeModel`'s steps: the random kernels drawn from ``seed`` (:func:`neurodyn.baselines.hydra_transform.
hydra_fit`: ``g`` groups of ``k`` kernels per dilation, half on the series and half on its first difference), the
features ``F = phi(X)`` (per group and time step the kernel of the largest response adds it to its count and the
kernel of the smallest adds one: ``D x 2 x g x k`` counts), scaled as the paper scales them (the square root, then
standardised where it is not zero: :func:`~neurodyn.baselines.hydra_transform.sparse_scaling`), then ridge with its
penalty chosen by exact leave-one-out error (the paper: ``RidgeClassifierCV(alphas=logspace(-3, 3, 10))``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from ..errors import ConfigError, check_min
from ..models.registry import register
from .feature_ridge import FeatureRidgeModel, RidgeConfig
from .hydra_transform import KERNEL_LENGTH, MIN_LENGTH, hydra_fit, hydra_transform, sparse_scaled, sparse_scaling


@dataclass
class HydraConfig(RidgeConfig):
    """Config of the ``hydra`` baseline (the fields of :class:`~neurodyn.baselines.feature_ridge.RidgeConfig` and
    :class:`~neurodyn.baselines.fitted.FittedConfig`, and):

    Attributes:
        n_kernels (int, 8): kernels per group, ``k`` (the paper's default).
        n_groups (int, 64): groups per dilation, ``g`` (the paper's default), half on the series and half on its
            first difference; even.
        max_channels (int, 8): most channels a group sums (multivariate series: ``clip(C // 2, 2, max_channels)``).
    """

    n_kernels: int = 8
    n_groups: int = 64
    max_channels: int = 8

    MODEL: ClassVar[str] = "hydra"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_min("hydra", self, ("n_kernels", "n_groups"), 2)
        check_min("hydra", self, ("max_channels",), 1)
        if self.n_groups % 2:
            raise ConfigError(
                f"model.n_groups must be even (half the groups convolve the series, half its first "
                f"difference); got {self.n_groups}"
            )


@register("hydra", HydraConfig)
class HydraModel(FeatureRidgeModel):
    min_length = MIN_LENGTH
    TRANSFORM_BUFFERS = {
        "dilations": ((0,), torch.long),
        "weights": ((0, 2, 0, 0, KERNEL_LENGTH), torch.float32),
        "channels": ((0, 2, 0, 1), torch.float32),
    }

    def fit_transform(self, x):
        cfg = self.cfg
        return hydra_fit(x, cfg.n_kernels, cfg.n_groups, cfg.max_channels, cfg.seed)

    def transform(self, x):
        return hydra_transform(x, self.transform_params())

    def scaling(self, feats):
        return sparse_scaling(feats)

    def scaled(self, feats, mean, scale):
        return sparse_scaled(feats, mean, scale)
