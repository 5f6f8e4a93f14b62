"""A task rebuilt from a checkpoint: :func:`task_from_spec` (above both task modules: steady and autoregressive
tasks in :mod:`.tasks`, sequence tasks in :mod:`.sequence_task`)."""

from __future__ import annotations

from typing import Any

from torch import nn

from ..errors import ConfigError
from .losses import build_loss
from .sequence_task import SequenceTask
from .tasks import AutoregressiveTask, LossFn, SteadyTask, Task


def task_from_spec(spec: dict[str, Any], normalizers: dict[str, nn.Module], loss: LossFn | None = None) -> Task:
    """The task a checkpoint was trained with, for prediction and evaluation: ``spec`` from :meth:`Task.spec`,
    ``normalizers`` loaded from the checkpoint (keys of :meth:`Task.normalizers`). ``loss`` only matters for
    training (default: relative L2)."""
    loss = loss or build_loss("rel_l2")
    name = spec.get("name")
    if name == "steady":
        return SteadyTask(loss, normalizers["input"], normalizers["target"], grid=spec.get("grid", True))
    if name == "autoregressive":
        return AutoregressiveTask(
            loss,
            normalizers["u"],
            int(spec["channels"]),
            bool(spec["frames_as_channels"]),
            step=int(spec["step"]),
            cf_norm=normalizers.get("cf"),
            ctx_norm=normalizers.get("ctx"),
            eval_mode=spec.get("eval_mode", "rollout"),
        )
    if name == "sequence":
        return SequenceTask(
            spec["kind"],
            normalizers["input"],
            normalizers.get("target"),
            per_step=bool(spec["per_step"]),
            n_targets=int(spec["n_targets"]),
            rul=bool(spec.get("rul", False)),
        )
    raise ConfigError(f"cannot rebuild a task of kind {name!r}; expected steady, autoregressive or sequence")
