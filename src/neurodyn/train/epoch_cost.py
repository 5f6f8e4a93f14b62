"""What a training will cost and what it reads, said before it starts: the run header's lines.

* :func:`estimate_epoch` -- seconds per epoch here, from a few timed training steps of a throwaway copy of the model
  (and an evaluation pass over the validation split): ``neurodyn compare`` sizes its equal-time budgets with it
  (:func:`neurodyn.compare.estimate_epochs`) and every training prints it (:func:`cost_line`);
* :func:`steps_line` -- how a sequence run's series reach the model: raw or pooled in time
  (:func:`neurodyn.data.sequence_pooling.describe_pooling`), and the steps a strided front end leaves to the core
  (:func:`neurodyn.nn.sequence_host.describe_front_end`). Printed in the header and written in ``summary.md``:
  nothing transforms the data silently.

The estimate trains a deep copy of the model with its own optimizer inside :func:`torch.random.fork_rng`, so the
model, its optimizer and the random streams of the training that follows are those it would have had without it.
"""

from __future__ import annotations

import copy
import itertools
import tempfile
import time
from typing import Any

import torch

from ..data.sequence_pooling import describe_pooling
from ..nn.sequence_host import describe_front_end

__all__ = ["cost_line", "estimate_epoch", "steps_line"]


def estimate_epoch(
    model: torch.nn.Module,
    task,
    train_set,
    eval_set,
    config,
    device: str | torch.device = "cpu",
    *,
    steps: int = 5,
    warmup: int = 2,
    eval_batches: int | None = None,
) -> dict[str, Any]:
    """Seconds per epoch of ``config`` (a :class:`~neurodyn.train.trainer.TrainConfig`) here, before training: the
    median time of ``steps`` training steps (after ``warmup``) of a throwaway trainer on a copy of ``model``, times
    the batches per epoch, plus one evaluation pass over ``eval_set`` (its first ``eval_batches`` batches scaled to
    all of them; ``None``: the whole pass). A model fitted in one pass (``knn``, ``minirocket``) is fitted once on
    the copy instead: its one epoch. Returns ``step_seconds``, ``eval_seconds``, ``estimated_seconds_per_epoch``,
    ``n_batches``, ``fitted`` and ``timed_steps``."""
    from ..baselines import FittedSequenceModel, fit_baseline
    from .trainer import Trainer

    device = torch.device(device)
    work = copy.deepcopy(model)
    n_batches = -(-len(train_set) // config.batch_size)
    with tempfile.TemporaryDirectory() as tmp, torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        if isinstance(work, FittedSequenceModel):  # its one pass as its run takes it: the fit, the validation split
            t0 = time.perf_counter()
            fit_baseline(
                work, task, train_set, eval_set, batch_size=config.eval_batch_size or config.batch_size, device=device
            )
            fit = time.perf_counter() - t0
            return {
                "step_seconds": fit / n_batches,
                "eval_seconds": 0.0,
                "estimated_seconds_per_epoch": fit,
                "n_batches": n_batches,
                "fitted": True,
                "timed_steps": 0,
            }
        trainer = Trainer(work, task, train_set, None, config, tmp, device=device, progress=False)
        step = trainer.measure_step_seconds(steps, warmup)
        evaluation = 0.0
        if eval_set is not None and len(eval_set):
            bs = config.eval_batch_size or config.batch_size
            total = -(-len(eval_set) // bs)
            n = total if eval_batches is None else max(1, min(eval_batches, total))
            work.eval()
            t0 = time.perf_counter()
            with torch.no_grad():
                task.evaluate(work, itertools.islice(trainer.eval_batches(eval_set), n))
            evaluation = (time.perf_counter() - t0) * total / n
    return {
        "step_seconds": step,
        "eval_seconds": evaluation,
        "estimated_seconds_per_epoch": step * trainer.n_batches + evaluation,
        "n_batches": trainer.n_batches,
        "fitted": False,
        "timed_steps": steps,
    }


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def cost_line(estimate: dict[str, Any], config) -> str:
    """The header's line on an :func:`estimate_epoch`: ``"cost: ~2.1 s per epoch (17 steps of 0.11 s, timed on 5,
    + 0.3 s of validation) -> ~14 min for 400 epochs (train.time_limit=840 s may stop it sooner)"``."""
    per_epoch = estimate["estimated_seconds_per_epoch"]
    if estimate.get("fitted"):
        return f"cost: fitted in one pass, ~{per_epoch:.3g} s here (no epochs)"
    val = f", + {estimate['eval_seconds']:.2g} s of validation" if estimate["eval_seconds"] else ""
    line = (
        f"cost: ~{per_epoch:.3g} s per epoch ({estimate['n_batches']} steps of {estimate['step_seconds']:.2g} s, "
        f"timed on {estimate['timed_steps']}{val}) -> ~{_duration(per_epoch * config.epochs)} for "
        f"{config.epochs} epochs"
    )
    if config.time_limit and per_epoch * config.epochs > config.time_limit:
        line += (
            f" (train.time_limit={config.time_limit:g} s stops it after about {int(config.time_limit // per_epoch)})"
        )
    if config.early_stop:
        line += "; early stopping may end it sooner"
    return line


def steps_line(train_set, model: torch.nn.Module | None = None) -> str | None:
    """How a sequence run's series reach the model (module doc): ``"raw series, 1460 steps; the front end's strides
    2x2x2: the core reads 183 steps"``, or ``"steps pooled by 6: 1344 -> 224 (data.max_steps=auto)"``; None for
    data that is not a sequence set."""
    if getattr(train_set, "pool", None) is None or not hasattr(train_set, "raw_steps"):
        return None
    text = describe_pooling(train_set.raw_steps, train_set.pool, train_set.max_steps)
    front = describe_front_end(getattr(model, "cfg", None), train_set.length) if model is not None else ""
    return text + (f"; {front}" if front else "")
