"""The ``sequence`` task: classification or regression over ``(B, T, C)`` with timestamps and masks.

Batches are dicts ``{"x": (B, T, C), "t": (B, T), "mask": (B, T) bool, "y": ...}`` (see
``data.sequences``). The model is called as ``model(x_norm, t=t, mask=mask)``; inputs are normalised
per channel on the valid steps of the training split, padded steps are zeroed, and a value left missing (NaN)
becomes 0, the training mean.

* classification: cross-entropy on logits ``(B, n_classes)`` (or ``(B, T, n_classes)`` per step,
  averaged over valid steps); evaluation reports ``accuracy`` (monitored, higher is better), ``nll``,
  ``balanced_accuracy`` (the mean over the classes present of each class's recall) and ``confusion``
  (``confusion[true][predicted]`` counts, a list of lists).
* regression: MSE on targets normalised with the training statistics; evaluation reports ``mse``,
  ``rmse`` (monitored, lower is better), ``mae`` and ``r2`` (``1 - SSE / SST`` per target, averaged over targets,
  as scikit-learn's ``r2_score``), and for a remaining-useful-life task (``rul=True``: the bearing data) the NAC
  paper's RUL ``score`` (eq. 58, summed over samples as written) with ``score_mean`` (per sample).

What a model sees of a batch is :meth:`SequenceTask.model_inputs` (the normalised inputs and the mask) and what it
is trained to output :meth:`SequenceTask.model_targets` (class indices, or normalised targets): the fitted baselines'
one pass (:func:`neurodyn.baselines.fit.fit_baseline`) reads the training batches through them too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..data.normalize import Normalizer
from ..errors import ConfigError
from .distributed import all_reduce_sum
from .tasks import Task

METRIC_DEFINITIONS: dict[str, str] = {
    "accuracy": "fraction of the cases (sequences, or steps of per-step labels) whose most probable class is the "
    "true one; dimensionless, higher is better",
    "balanced_accuracy": "mean over the classes present of each class's recall (its cases classified right); "
    "dimensionless, higher is better",
    "nll": "mean negative log-likelihood (cross-entropy) of the true class; nats, lower is better",
    "n": "number of cases scored (sequences, or valid steps of per-step targets; regression: target values)",
    "rmse": "root-mean-square error of the predicted targets; the target's units",
    "mse": "mean squared error of the predicted targets (rmse^2); the target's units squared",
    "mae": "mean absolute error of the predicted targets; the target's units",
    "r2": "coefficient of determination 1 - SSE / SST per target, mean over targets; dimensionless, 1 exact, 0 as "
    "good as the test set's mean",
    "score": "the NAC paper's RUL score (eq. 58): exp(-d/13) - 1 for early, exp(d/10) - 1 for late predictions "
    "(d = pred - target, in the target's units), summed over cases; dimensionless, lower is better",
    "score_mean": "the RUL score per case (score / n); dimensionless, lower is better",
}
"""One line per sequence metric: what it measures and its units."""


def rul_score(pred: torch.Tensor, target: torch.Tensor, reduction: str = "sum") -> torch.Tensor:
    """NAC paper eq. 58 (the PHM08 asymmetric score): with ``d = pred - target``,
    ``exp(-d/13) - 1`` for early predictions (``d < 0``) and ``exp(d/10) - 1`` for late ones
    (``d >= 0``), summed (``reduction="sum"``), averaged (``"mean"``) or per element (``"none"``)."""
    if pred.shape != target.shape:
        raise ValueError(
            f"rul_score: prediction shape {tuple(pred.shape)} differs from target shape {tuple(target.shape)}"
        )
    d = (pred - target).double()
    s = torch.where(d < 0, torch.exp(-d / 13.0) - 1.0, torch.exp(d / 10.0) - 1.0)
    return {"sum": s.sum, "mean": s.mean, "none": lambda: s}[reduction]()


class SequenceTask(Task):
    """Per-sequence or per-step classification / regression (see module docstring)."""

    name = "sequence"

    def __init__(
        self,
        kind: str,
        x_norm: Normalizer,
        y_norm: Normalizer | None = None,
        per_step: bool = False,
        n_targets: int = 1,
        rul: bool = False,
    ):
        if kind not in ("classification", "regression"):
            raise ConfigError(f"sequence task kind must be classification or regression, got {kind!r}")
        if kind == "regression" and y_norm is None:
            raise ConfigError("a regression sequence task needs a target normalizer")
        self.kind, self.x_norm, self.y_norm, self.per_step, self.n_targets = kind, x_norm, y_norm, per_step, n_targets
        self.rul = bool(rul)
        self.monitor = ("accuracy", "max") if kind == "classification" else ("rmse", "min")

    def normalizers(self) -> dict[str, nn.Module]:
        norms = {"input": self.x_norm, "target": self.y_norm}
        return {k: m for k, m in norms.items() if m is not None}

    def spec(self) -> dict[str, Any]:
        """What rebuilds this task from a checkpoint besides its normalizers (``task_spec.task_from_spec``)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "per_step": self.per_step,
            "n_targets": self.n_targets,
            "rul": self.rul,
        }

    def expected_output_shape(self, batch: dict[str, torch.Tensor]) -> tuple[int, ...]:
        B, T = batch["x"].shape[:2]
        return (B, T, self.n_targets) if self.per_step else (B, self.n_targets)

    def model_inputs(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """What the model is given of ``batch``: ``x`` normalised per channel ``(B, T, C)``, zero on padded steps and
        where a value is still missing, and the mask ``(B, T)`` bool."""
        mask = batch["mask"].bool()
        # a value still missing (NaN: data.missing=mean, or a channel never observed in its sequence) becomes the
        # training mean, 0 once normalised
        return torch.nan_to_num(self.x_norm.encode(batch["x"]), nan=0.0) * mask[..., None].to(batch["x"].dtype), mask

    def model_targets(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """What the model is trained to output for ``batch``: class indices, or the targets normalised with the
        training statistics."""
        return batch["y"] if self.kind == "classification" else self.y_norm.encode(batch["y"])

    def _raw(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        x, mask = self.model_inputs(batch)
        return model(x, t=batch.get("t"), mask=mask)

    def predict(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Class logits, or regression values in the data's units."""
        out = self._raw(model, batch)
        return out if self.kind == "classification" else self.y_norm.decode(out)

    def _step_mask(self, batch) -> torch.Tensor | None:
        return batch["mask"].bool() if self.per_step else None

    def training_loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = self._raw(model, batch)
        m = self._step_mask(batch)
        if self.kind == "classification":
            if m is not None:
                return F.cross_entropy(out[m], batch["y"][m])
            return F.cross_entropy(out, batch["y"])
        err = (out - self.model_targets(batch)).square()
        return err[m].mean() if m is not None else err.mean()

    @torch.no_grad()
    def evaluate(
        self,
        model: nn.Module,
        batches: Iterable[dict[str, torch.Tensor]],
        keep: Callable[[torch.Tensor], Any] | None = None,
    ) -> dict[str, Any]:
        """Metrics of ``model`` over ``batches``; ``keep`` (a function) is given each batch's :meth:`predict`, so one
        pass over the data both scores and predicts."""
        K = self.n_targets
        sums = torch.zeros(4, dtype=torch.float64)  # (count, correct | se, nll | ae, rul score)
        confusion = torch.zeros(K, K, dtype=torch.float64)  # classification: [true, predicted]
        moments = torch.zeros(3, K, dtype=torch.float64)  # regression: per target sum y, y^2, se
        for batch in batches:
            pred = self.predict(model, batch)
            if keep is not None:
                keep(pred)
            y = batch["y"]
            m = self._step_mask(batch)
            if m is not None:
                pred, y = pred[m], y[m]
            if self.kind == "classification":
                guess = pred.argmax(-1)
                sums += torch.tensor(
                    [len(y), (guess == y).sum().item(), F.cross_entropy(pred.double(), y, reduction="sum").item(), 0],
                    dtype=torch.float64,
                )
                confusion += torch.bincount((y * K + guess).flatten().cpu(), minlength=K * K).reshape(K, K).double()
            else:
                d = (pred - y).double()
                yd = y.double().reshape(-1, K)
                moments += torch.stack([yd.sum(0), yd.square().sum(0), d.reshape(-1, K).square().sum(0)]).cpu()
                sums += torch.tensor(
                    [
                        d.numel(),
                        d.square().sum().item(),
                        d.abs().sum().item(),
                        rul_score(pred, y).item() if self.rul else 0.0,
                    ],
                    dtype=torch.float64,
                )
        sums = all_reduce_sum(sums)
        n = max(float(sums[0]), 1.0)
        if self.kind == "classification":
            confusion = all_reduce_sum(confusion)
            present = confusion.sum(1) > 0
            recall = confusion.diagonal()[present] / confusion.sum(1)[present]
            return {
                "accuracy": float(sums[1]) / n,
                "balanced_accuracy": float(recall.mean()) if len(recall) else 0.0,
                "nll": float(sums[2]) / n,
                "n": int(sums[0]),
                "confusion": [[int(v) for v in row] for row in confusion.tolist()],
            }
        moments = all_reduce_sum(moments)
        rows = n / K
        sst = moments[1] - moments[0].square() / rows
        r2 = torch.where(sst > 0, 1.0 - moments[2] / sst.clamp_min(1e-300), torch.zeros_like(sst))
        mse = float(sums[1]) / n
        out = {"rmse": mse**0.5, "mse": mse, "mae": float(sums[2]) / n, "r2": float(r2.mean()), "n": int(sums[0])}
        if self.rul:
            out.update(score=float(sums[3]), score_mean=float(sums[3]) / n)
        return out
