"""Parameter-initialisation helpers shared by the layers and models."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["inv_softplus", "trunc_normal_init"]


def inv_softplus(y: torch.Tensor) -> torch.Tensor:
    """``x`` with ``softplus(x) = y`` for ``y > 0``: ``x = y + log(1 - exp(-y))`` (e.g. a dt bias from a dt)."""
    return y + torch.log(-torch.expm1(-y))


def trunc_normal_init(model: nn.Module, skip=()) -> None:
    """Truncated-normal(std 0.02) weights and zero biases for every ``nn.Linear`` not in ``skip`` (the Transolver /
    LaMO code's initialisation)."""
    skip_ids = {id(m) for m in skip}
    for m in model.modules():
        if isinstance(m, nn.Linear) and id(m) not in skip_ids:
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
