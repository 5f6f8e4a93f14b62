"""Parameter-initialisation helpers shared by the state-space layers."""
from __future__ import annotations

import torch

__all__ = ["inv_softplus"]


def inv_softplus(y: torch.Tensor) -> torch.Tensor:
    """``x`` with ``softplus(x) = y`` for ``y > 0``: ``x = y + log(1 - exp(-y))`` (e.g. a dt bias from a dt)."""
    return y + torch.log(-torch.expm1(-y))
