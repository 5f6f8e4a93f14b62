"""Tasks: what one training step computes and how a split is evaluated.

A task turns a batch dict into a prediction in physical units and a loss; the trainer's loop is
the same for every task. ``steady`` (a -> u) lives here; ``autoregressive`` and ``sequence`` plug in
with the same three methods.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from torch import nn

from ..data.normalize import Normalizer
from .metrics import MetricAccumulator


class SteadyTask:
    """Operator learning a -> u: ``pred = y_norm.decode(model(x_norm.encode(x)))``; loss on physical units."""

    name = "steady"

    def __init__(self, loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                 x_norm: Normalizer, y_norm: Normalizer):
        self.loss_fn = loss
        self.x_norm = x_norm
        self.y_norm = y_norm

    def normalizers(self) -> dict[str, nn.Module]:
        return {"input": self.x_norm, "target": self.y_norm}

    def to(self, device: torch.device) -> "SteadyTask":
        self.x_norm.to(device)
        self.y_norm.to(device)
        return self

    def predict(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = model(self.x_norm.encode(batch["x"]), pos=batch.get("pos"), ctx=batch.get("ctx"))
        return self.y_norm.decode(out)

    def loss(self, pred: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean of the per-sample loss over the batch."""
        return self.loss_fn(pred, batch["y"])

    @torch.no_grad()
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, torch.Tensor]]) -> dict[str, Any]:
        acc = MetricAccumulator()
        for batch in batches:
            acc.update(self.predict(model, batch), batch["y"])
        acc.reduce_()
        return acc.compute()
