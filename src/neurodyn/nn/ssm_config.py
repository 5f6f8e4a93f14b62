"""The sizes every selective state-space layer shares, nested as ``model.ssm`` in the model configs.

``SSMConfig`` holds what :class:`~neurodyn.nn.mamba.LatentSSM` (LaMO), :class:`~neurodyn.nn.geomamba.GeoMambaKernel`
(GeoMaNO) and :class:`~neurodyn.nn.kirchhoff.CascadedKirchhoffBlock` (CHONN) mean the same way:

* ``d_state``: ``N``, states per inner channel (``h_t in R^N``);
* ``expand``: inner width ``D_inner = expand * d_model`` of the scan;
* ``d_conv``: kernel size of the depthwise convolution before the scan.

Choices with model-specific vocabularies (scan directions, discretisation, heads, dt rank, ...) stay in the
model configs. Each model config declares ``ssm: SSMConfig = field(default_factory=...)`` with its own
defaults; ``neurodyn.models.build`` fills the section from a nested mapping (``model.ssm.d_state=8``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["SSMConfig"]


@dataclass
class SSMConfig:
    """``d_state`` (N), ``expand`` (inner width / d_model), ``d_conv`` (depthwise kernel size)."""

    d_state: int = 16
    expand: float = 1.0
    d_conv: int = 3

    def __post_init__(self):
        if int(self.d_state) < 1:
            raise ConfigError(f"ssm.d_state must be >= 1, got {self.d_state!r}.")
        if float(self.expand) <= 0:
            raise ConfigError(f"ssm.expand must be > 0, got {self.expand!r}.")
