"""The learning-rate schedule, stepped once per optimizer step, over segments of epochs.

A run trains ``train.epochs`` epochs under one schedule (``onecycle``: OneCycleLR, the neural-operator protocol;
``cosine``: cosine annealing to 0; ``step``: StepLR every ``step_size`` epochs; ``none``: constant). Raising
``train.epochs`` of a run continues it in a new *segment* that covers the added epochs:

* ``onecycle``: a new cycle over the added epochs: the learning rate warms up again from ``train.lr / 25`` to
  ``train.lr`` (``pct_start`` of the segment) and anneals (a warm restart; the optimizer's moments carry over);
* ``cosine``: restarts at ``train.lr`` and anneals to 0 over the added epochs;
* ``step`` and ``none``: continue unchanged (they have no end).

The segments are saved with every checkpoint, so a resumed run rebuilds exactly the schedule it was on.
"""

from __future__ import annotations

from typing import Any

import torch

PER_SEGMENT = ("onecycle", "cosine")  # schedules with an end, rebuilt for every segment


class Schedule:
    """``scheduler`` of the segment that holds ``epoch``; ``segments`` are the epoch counts at which they end."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        kind: str,
        lr: float,
        steps_per_epoch: int,
        epochs: int,
        pct_start: float = 0.3,
        step_size: int = 100,
        gamma: float = 0.5,
    ):
        self.optimizer, self.kind, self.lr, self.steps_per_epoch = optimizer, kind, lr, steps_per_epoch
        self.pct_start, self.step_size, self.gamma = pct_start, step_size, gamma
        self.segments = [epochs]
        self.current = self.segment(0)
        self.scheduler = self._make(*self.current)

    def segment(self, epoch: int) -> tuple[int, int]:
        """``(first epoch, end epoch)`` of the segment holding ``epoch`` (the last segment past the end)."""
        start = 0
        for end in self.segments:
            if epoch < end:
                return start, end
            start = end
        return (self.segments[-2] if len(self.segments) > 1 else 0), self.segments[-1]

    def _make(self, start: int, end: int):
        opt, steps = self.optimizer, max(1, (end - start) * self.steps_per_epoch)
        if self.kind == "onecycle":
            return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.lr, total_steps=steps, pct_start=self.pct_start)
        if self.kind == "cosine":
            for group in opt.param_groups:  # a restart begins at the configured rate
                group["lr"] = group["initial_lr"] = self.lr
            return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
        if self.kind == "step":  # stepped per batch, so the epoch count is scaled
            return torch.optim.lr_scheduler.StepLR(
                opt, step_size=self.step_size * self.steps_per_epoch, gamma=self.gamma
            )
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)

    def start_epoch(self, epoch: int) -> None:
        """Call before the first step of ``epoch``: enters a new segment's schedule where one begins."""
        if self.kind in PER_SEGMENT and self.segment(epoch) != self.current:
            self.current = self.segment(epoch)
            self.scheduler = self._make(*self.current)

    def step(self) -> None:
        self.scheduler.step()

    def extend(self, epochs: int) -> None:
        """Train to ``epochs`` (more than the last segment's end): a new segment over the added epochs."""
        if epochs > self.segments[-1]:
            self.segments.append(epochs)

    def state_dict(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler.state_dict(),
            "segments": list(self.segments),
            "current": list(self.current),
        }

    def load_state_dict(self, state: dict[str, Any], epoch: int, epochs: int) -> None:
        """Restore from a checkpoint at ``epoch`` (the next epoch to train); ``epochs`` is the run's ``train.epochs``
        now (more than the saved end extends the run). Accepts the older layout (the scheduler's state alone,
        one segment)."""
        if "segments" in state:
            self.segments, saved = list(state["segments"]), tuple(state["current"])
            sched = state["scheduler"]
        else:
            self.segments, saved, sched = [epochs], (0, epochs), state
        self.extend(epochs)
        self.current = saved if self.kind in PER_SEGMENT else self.segment(epoch)
        self.scheduler = self._make(*self.current)
        self.scheduler.load_state_dict(sched)  # then the optimizer's state (its learning rates); start_epoch() enters
        # the added segment of an extended run at its first epoch
