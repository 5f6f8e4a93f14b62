"""The ``majority`` baseline: the training-class frequencies, or the training mean of the targets.

Fitted on ``y``: for ``K`` classes with counts ``n_k`` of ``N`` training series, every prediction is the logits
``log(n_k / N)`` (clamped below at ``log 1e-6``), whose arg-max is the most frequent class (ties: the lowest index);
for regression targets ``y (N, k)`` it is their mean ``(1/N) sum_i y_i``. The series themselves are not read.
"""

from __future__ import annotations

import torch

from ..models.registry import register
from .fitted import LOG_EPS, FittedConfig, FittedSequenceModel


@register("majority", FittedConfig)
class MajorityModel(FittedSequenceModel):
    def __init__(self, cfg: FittedConfig):
        super().__init__(cfg)
        self.register_buffer("output", torch.zeros(cfg.out_channels))

    def fit_state(self, x, y, progress=False):
        if y.is_floating_point():
            self.set_state(output=y.double().mean(0).float())
        else:
            counts = torch.bincount(y, minlength=self.cfg.out_channels).double()
            self.set_state(output=(counts / counts.sum()).log().clamp_min(LOG_EPS).float())

    def predict(self, x):
        return self.output.expand(len(x), -1)
