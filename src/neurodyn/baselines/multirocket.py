"""The ``multirocket`` baseline: MultiRocket features (Tan et al., DMKD 2022) and a ridge classifier or regressor.

Fitted on resampled series ``X (N, L, C)`` (``L >= 10``: the first difference must fit a kernel) by
:class:`~neurodyn.baselines.feature_ridge.FeatureRidgeModel`'s steps: the transform's parameters drawn from ``X`` and
``seed`` (:func:`neurodyn.baselines.multirocket_transform.multirocket_fit`: MiniRocket's dilations, channel subsets
and biases of the series and of its first difference), the features ``F = phi(X)`` (PPV, MPV, MIPV and LSPV of every
convolution: ``8 x 84 x (n_features // 8 // 84)`` of them, 49,728 at the paper's 50,000), standardised with their
training mean and deviation, then ridge with its penalty chosen by exact leave-one-out error (the paper:
``RidgeClassifierCV(alphas=logspace(-3, 3, 10))`` on standardised features).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from ..errors import check_min
from ..models.registry import register
from .feature_ridge import FeatureRidgeModel, RidgeConfig
from .minirocket_transform import N_KERNELS
from .multirocket_transform import MIN_LENGTH, multirocket_fit, multirocket_transform


@dataclass
class MultiRocketConfig(RidgeConfig):
    """Config of the ``multirocket`` baseline (the fields of :class:`~neurodyn.baselines.feature_ridge.RidgeConfig`
    and :class:`~neurodyn.baselines.fitted.FittedConfig`, and):

    Attributes:
        n_features (int, 50000): features requested; ``8 x 84 x (n_features // 8 // 84)`` are made (the paper:
            50,000 -> 49,728: 6,216 kernel-bias pairs on the series and 6,216 on its difference, 4 features each).
        max_dilations (int, 32): most dilations per kernel (the paper's default, as MiniRocket's).
    """

    n_features: int = 50_000
    max_dilations: int = 32

    MODEL: ClassVar[str] = "multirocket"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_min("multirocket", self, ("n_features",), 8 * N_KERNELS)
        check_min("multirocket", self, ("max_dilations",), 1)


_DILATIONS = {
    "dilations": ((0,), torch.long),
    "per_dilation": ((0,), torch.long),
    "channels": ((0, N_KERNELS, 1), torch.float32),
    "biases": ((0,), torch.float32),
}


@register("multirocket", MultiRocketConfig)
class MultiRocketModel(FeatureRidgeModel):
    min_length = MIN_LENGTH
    TRANSFORM_BUFFERS = {**_DILATIONS, **{f"diff_{k}": v for k, v in _DILATIONS.items()}}

    def fit_transform(self, x):
        return multirocket_fit(x, self.cfg.n_features, self.cfg.max_dilations, self.cfg.seed)

    def transform(self, x):
        return multirocket_transform(x, self.transform_params())
