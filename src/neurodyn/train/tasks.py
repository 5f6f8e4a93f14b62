"""Tasks: what one training step computes and how a split is evaluated.

A task turns a batch dict into predictions in physical units; the trainer's loop is the same for
every task and only calls ``training_loss``, ``evaluate``, ``normalizers`` and ``to``.

* ``SteadyTask``: operator learning a -> u.
* ``AutoregressiveTask``: m frames -> the next s frames, applied recursively; trained with teacher
  forcing or by unrolled rollouts (optionally the pushforward trick), evaluated by rollout over the
  whole horizon.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from ..data.normalize import Normalizer
from ..errors import ConfigError
from .distributed import all_reduce_max, all_reduce_sum
from .losses import masked_loss
from .metrics import MetricAccumulator
from .rollout import from_frames, rollout, teacher_forced, to_frames

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class Task:
    """What the tasks share: their normalizers (saved in checkpoints) travel with them to a device."""

    def normalizers(self) -> dict[str, nn.Module]:
        raise NotImplementedError

    def to(self, device: torch.device) -> Task:
        for m in self.normalizers().values():
            m.to(device)
        return self


class SteadyTask(Task):
    """``pred = y_norm.decode(model(x_norm.encode(x)))``; the loss is taken on physical units (FNO protocol).

    ``grid``: whether the fields lie on a uniform grid (False for point clouds: no boundary or spectral
    metrics). A batch with ``mask`` (B, N) (point clouds padded to a common point count, True on real points)
    is scored on its real points only, in the loss (:func:`~neurodyn.train.losses.masked_loss`) and the
    metrics, and the model is given the mask."""

    name = "steady"

    def __init__(self, loss: LossFn, x_norm: Normalizer, y_norm: Normalizer, grid: bool = True):
        self.loss_fn = loss
        self.x_norm = x_norm
        self.y_norm = y_norm
        self.grid = bool(grid)

    def normalizers(self) -> dict[str, nn.Module]:
        return {"input": self.x_norm, "target": self.y_norm}

    def spec(self) -> dict[str, Any]:
        """What rebuilds this task from a checkpoint besides its normalizers (``task_spec.task_from_spec``)."""
        return {"name": self.name, "grid": self.grid}

    def predict(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        extra = {k: batch[k] for k in ("pos", "ctx", "mask") if batch.get(k) is not None}  # a plain model(x) works too
        out = model(self.x_norm.encode(batch["x"]), **extra)
        return self.y_norm.decode(out)

    def training_loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean of the per-sample loss over the batch (over each sample's real points when it is padded)."""
        pred = self.predict(model, batch)
        if batch.get("mask") is not None:
            return masked_loss(self.loss_fn, pred, batch["y"], batch["mask"])
        return self.loss_fn(pred, batch["y"])

    @torch.no_grad()
    def evaluate(
        self,
        model: nn.Module,
        batches: Iterable[dict[str, torch.Tensor]],
        keep: Callable[[torch.Tensor], Any] | None = None,
    ) -> dict[str, Any]:
        """Metrics of ``model`` over ``batches``; ``keep`` (a function) is given each batch's :meth:`predict`, so one
        pass over the data both scores and predicts."""
        acc = MetricAccumulator(grid=self.grid)
        for batch in batches:
            pred = self.predict(model, batch)
            if keep is not None:
                keep(pred)
            acc.update(pred, batch["y"], batch.get("mask"))
        acc.reduce_()
        return acc.compute()


def _horizon_rel_l2(pred: torch.Tensor, true: torch.Tensor) -> torch.Tensor:
    """(B,) relative L2 of each trajectory over all its frames and points: ||pred - true|| / ||true||."""
    b = true.shape[0]
    err = (pred - true).double().reshape(b, -1).norm(dim=-1)
    return err / true.double().reshape(b, -1).norm(dim=-1).clamp_min(1e-12)


class AutoregressiveTask(Task):
    """Next-frame prediction applied recursively.

    One model call maps the last ``t_in`` frames (plus context fields ``cf`` as extra channels and the
    context vector ``ctx``) to the next ``step`` frames. ``train_mode``:

    * ``teacher_forcing``: windows of ``step`` target frames, inputs always true frames;
    * ``rollout``: windows of ``rollout_steps * step`` frames, predictions fed back with gradients
      through the whole unroll, loss averaged over the unrolled frames (FNO's NS training);
    * ``pushforward``: (Brandstetter et al. 2022) unroll a random 0..``pushforward`` steps without
      gradient, then one step with gradient against the true frames at that time.

    ``input_noise`` adds N(0, sigma^2) to the normalised input frames in training (ST-SSM).

    ``eval_mode`` says how the horizon is predicted in evaluation:

    * ``rollout`` (default): from the first ``t_in`` true frames, predictions fed back over the whole
      horizon (what a forecast from an initial condition can do);
    * ``teacher_forcing``: every step from true frames (one-step-ahead errors averaged over the horizon),
      the reading of the ST-SSM paper's "teacher-forced" rows that its Table 1 values fit.

    Evaluation reports, for the chosen mode, the relative L2 of every step (``rel_l2_per_step``) and of
    the whole horizon (``rel_l2``, eq. 11: one norm over all (t, x) per trajectory, averaged over
    trajectories) and the field metrics over all frames; the horizon error of both modes is always
    reported as ``rel_l2_rollout`` and ``rel_l2_teacher_forced``.
    """

    name = "autoregressive"
    MODES = ("teacher_forcing", "rollout", "pushforward")
    EVAL_MODES = ("rollout", "teacher_forcing")

    def __init__(
        self,
        loss: LossFn,
        u_norm: Normalizer,
        channels: int,
        frames_as_channels: bool = True,
        step: int = 1,
        cf_norm: Normalizer | None = None,
        ctx_norm: Normalizer | None = None,
        train_mode: str = "teacher_forcing",
        pushforward: int = 0,
        input_noise: float = 0.0,
        eval_mode: str = "rollout",
    ):
        if train_mode not in self.MODES:
            raise ConfigError(f"train.rollout.mode must be one of {', '.join(self.MODES)}, got {train_mode!r}")
        if eval_mode not in self.EVAL_MODES:
            raise ConfigError(f"train.rollout.eval_mode must be one of {', '.join(self.EVAL_MODES)}, got {eval_mode!r}")
        if train_mode == "pushforward" and pushforward < 1:
            raise ConfigError(
                "train.rollout.mode=pushforward needs train.rollout.pushforward >= 1 (the most unrolled steps)"
            )
        self.loss_fn, self.u_norm, self.cf_norm, self.ctx_norm = loss, u_norm, cf_norm, ctx_norm
        self.channels, self.fac, self.step = channels, frames_as_channels, step
        self.train_mode, self.pushforward, self.input_noise = train_mode, pushforward, input_noise
        self.eval_mode = eval_mode

    def normalizers(self) -> dict[str, nn.Module]:
        norms = {"u": self.u_norm, "cf": self.cf_norm, "ctx": self.ctx_norm}
        return {k: m for k, m in norms.items() if m is not None}

    def spec(self) -> dict[str, Any]:
        """What rebuilds this task from a checkpoint besides its normalizers (``task_spec.task_from_spec``)."""
        return {
            "name": self.name,
            "channels": self.channels,
            "frames_as_channels": self.fac,
            "step": self.step,
            "eval_mode": self.eval_mode,
        }

    # ------------------------------------------------------------------------------------------
    def step_fn(self, model: nn.Module, batch: dict[str, torch.Tensor], noise: float = 0.0):
        """``f(window, k)``: physical frames (B, t_in, *spatial, C) -> the next ``step`` physical frames."""
        ctx = self.ctx_norm.encode(batch["ctx"]) if self.ctx_norm is not None and "ctx" in batch else batch.get("ctx")

        def f(window: torch.Tensor, k: int) -> torch.Tensor:
            z = self.u_norm.encode(window)
            if noise > 0:
                z = z + noise * torch.randn_like(z)
            x = from_frames(z, self.fac)
            if self.cf_norm is not None:
                cf = batch["cf_all"][:, window.shape[1] + k - 1] if "cf_all" in batch else batch["cf"]
                cf = self.cf_norm.encode(cf)
                x = torch.cat([x, cf if self.fac else cf[:, None].expand(*z.shape[:2], *cf.shape[1:])], dim=-1)
            out = model(x, pos=batch.get("pos"), ctx=ctx)
            return self.u_norm.decode(to_frames(out, self.channels, self.fac))

        return f

    def predict(self, model: nn.Module, batch: dict[str, torch.Tensor], mode: str = "rollout") -> torch.Tensor:
        """As many frames as ``batch["y"]`` holds, in the dataset's layout: rolled out from ``batch["x"]``
        (``mode="rollout"``) or each from the true frames before it (``"teacher_forcing"``)."""
        history = to_frames(batch["x"], self.channels, self.fac)
        truth = to_frames(batch["y"], self.channels, self.fac)
        f = self.step_fn(model, batch)
        pred = rollout(f, history, truth.shape[1]) if mode == "rollout" else teacher_forced(f, history, truth)
        return from_frames(pred, self.fac)

    def training_loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        history = to_frames(batch["x"], self.channels, self.fac)
        target = to_frames(batch["y"], self.channels, self.fac)
        f = self.step_fn(model, batch, noise=self.input_noise)
        if self.train_mode == "pushforward":
            k = int(torch.randint(0, self.pushforward + 1, ()))
            frames = history
            if k:
                with torch.no_grad():
                    frames = torch.cat([history, rollout(f, history, k * self.step)], dim=1)
            pred = f(frames[:, -history.shape[1] :], k * self.step)
            return self.loss_fn(
                from_frames(pred, self.fac), from_frames(target[:, k * self.step : (k + 1) * self.step], self.fac)
            )
        pred = rollout(f, history, target.shape[1])
        # mean over the unrolled frames of the per-frame loss
        b, t = pred.shape[:2]
        return self.loss_fn(pred.reshape(b * t, *pred.shape[2:]), target.reshape(b * t, *target.shape[2:]))

    @torch.no_grad()
    def evaluate(
        self,
        model: nn.Module,
        batches: Iterable[dict[str, torch.Tensor]],
        keep: Callable[[torch.Tensor], Any] | None = None,
    ) -> dict[str, Any]:
        """Metrics of ``model`` over ``batches`` in both modes (``rel_l2`` in ``eval_mode``); ``keep`` (a function)
        is given each batch's rollout (:meth:`predict`'s default), so one pass both scores and predicts."""
        acc = MetricAccumulator()
        step_sums: torch.Tensor | None = None
        horizon_sum = torch.zeros(2, dtype=torch.float64)
        other = "teacher_forcing" if self.eval_mode == "rollout" else "rollout"
        other_sum = torch.zeros(1, dtype=torch.float64)
        for batch in batches:
            raw = {mode: self.predict(model, batch, mode) for mode in (self.eval_mode, other)}
            if keep is not None:
                keep(raw["rollout"])
            pred = to_frames(raw[self.eval_mode], self.channels, self.fac)
            true = to_frames(batch["y"], self.channels, self.fac)
            b, t = true.shape[:2]
            other_pred = to_frames(raw[other], self.channels, self.fac)
            other_sum += _horizon_rel_l2(other_pred, true).sum().cpu()
            err = (pred - true).double().reshape(b, t, -1)
            ref = true.double().reshape(b, t, -1)
            per_step = err.norm(dim=-1) / ref.norm(dim=-1).clamp_min(1e-12)  # (B, T)
            step_sums = per_step.sum(0).cpu() if step_sums is None else step_sums + per_step.sum(0).cpu()
            horizon_sum += torch.tensor([_horizon_rel_l2(pred, true).sum().item(), b], dtype=torch.float64)
            acc.update(pred.reshape(b * t, *pred.shape[2:]), true.reshape(b * t, *true.shape[2:]))
        acc.reduce_()
        horizon_sum, other_sum = all_reduce_sum(horizon_sum), all_reduce_sum(other_sum)
        # a rank without evaluation samples (a small split over several processes) has no steps: agree on the count
        steps = int(all_reduce_max(torch.tensor([0 if step_sums is None else len(step_sums)]))[0])
        step_sums = all_reduce_sum(step_sums if step_sums is not None else torch.zeros(steps, dtype=torch.float64))
        out = {f"frame_{k}": v for k, v in acc.compute().items()}
        n = horizon_sum[1]
        out = {
            "rel_l2": float(horizon_sum[0] / n),
            "rel_l2_per_step": (step_sums / n).tolist(),
            f"rel_l2_{self.eval_mode.replace('_forcing', '_forced')}": float(horizon_sum[0] / n),
            f"rel_l2_{other.replace('_forcing', '_forced')}": float(other_sum[0] / n),
            **out,
        }
        return out
